module example.com/outside-agent

go 1.26.0
