"""What every agentnet server process shares (never imported by the SDK at module level):
the server factory with health, reflection and limits (:mod:`servicekit.runtime`), the error
boundary of servicers, and bearer credentials and secret files (:mod:`servicekit.auth`).
See ``docs/architecture.md``.
"""
