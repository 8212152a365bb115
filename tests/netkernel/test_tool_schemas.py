"""The network tools' JSON schemas are built once per model (netkernel/tool_schemas.py): every
caller gets the same schema, as a copy of its own, and the hub's JSON text says the same."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from netkernel.tool_schemas import ALL_TOOLS, parameters_schema, parameters_schema_json


@pytest.mark.parametrize("name", sorted(ALL_TOOLS))
def test_each_caller_gets_the_models_schema_as_a_copy_of_its_own(name: str) -> None:
    model = ALL_TOOLS[name]
    expected = model.model_json_schema()
    expected.pop("description", None)
    expected.pop("title", None)
    first = parameters_schema(model)
    assert first == expected
    first["properties"].clear()  # a caller changing its copy changes nobody else's
    first["injected"] = True
    assert parameters_schema(model) == expected
    assert json.loads(parameters_schema_json(model)) == expected


def test_a_model_defined_later_gets_its_own_schema() -> None:
    class Later(BaseModel):
        """Not a network tool."""

        when: int

    assert parameters_schema(Later)["required"] == ["when"]
    assert "title" not in parameters_schema(Later)
