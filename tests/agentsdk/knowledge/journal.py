"""The journal companion the memory tests build: working-memory aggregation after every ask."""

from __future__ import annotations

from agentsdk import Agent, KnowledgeConfig, OpenAIConfig
from agentsdk.aggregate import AggregateTrigger, WorkingMemoryAggregate
from agentsdk.knowledge import KnowledgeStore
from agentsdk.policies import ConversationPolicy, WorkingMemoryPolicy


def journal_agent(store: KnowledgeStore, config: OpenAIConfig) -> Agent:
    """A fresh journal agent whose memory lives in ``store``."""
    return Agent(
        "journal",
        "You are a daily journal companion.",
        config=config,
        knowledge=KnowledgeConfig(
            store=store,
            aggregate=WorkingMemoryAggregate(config=config),
            aggregate_trigger=AggregateTrigger(on_end=True),
        ),
        assembly=[WorkingMemoryPolicy(), ConversationPolicy()],
    )
