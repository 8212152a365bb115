"""Governance: the policy the hub enforces (rules per identity, who may register,
expectations per channel type), loaded from a YAML/JSON file and from the rules
identities carry. The schema is :mod:`hubsvc.governance.policy`; docs/governance.md
describes it for operators."""
