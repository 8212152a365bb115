"""The operator web console (``agentnet console``): a Starlette app over :class:`agentsdk.operator.OperatorClient`.

``options`` (its limits), ``sessions`` (the login sessions: random ids server-side, CSRF tokens),
``views`` (what each page reads from the hub), ``app`` (routes, the login guard, the live streams),
``server`` (uvicorn on a loopback address)."""
