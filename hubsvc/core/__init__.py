"""The transport-agnostic hub core: registry, channels, admission, delivery, tasks, tools."""
