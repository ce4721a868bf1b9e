"""Tool schemas as an assistant reads them: pydantic's own generator, told to leave out what repeats.

Every assistant session pays for the tool definitions, so the generator drops the titles pydantic derives from
names (a property's name already says it), the ``default: null`` of optional fields (absence from ``required``
already says it) and spells a nullable simple type as ``type: [X, "null"]`` instead of a three-object ``anyOf``.
Descriptions, defaults, bounds, enums and ``additionalProperties: false`` stay.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema


class CompactJsonSchema(GenerateJsonSchema):
    """pydantic's JSON Schema generator without derived titles, null defaults and nullable ``anyOf``."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        out = super().model_schema(schema)
        out.pop("title", None)
        return out

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        out = super().default_schema(schema)
        factory = schema.get("default_factory")
        inputs = self.mode == "validation"  # results always carry every field: their defaults say nothing
        if inputs and "default" not in out and factory is not None and not schema.get("default_factory_takes_data"):
            out["default"] = self.encode_default(factory())  # type: ignore[call-arg]  # an empty list or dict
        if "default" in out and out["default"] is None:
            del out["default"]
        return out

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        inner = self.generate_inner(schema["schema"])
        kind = inner.get("type")
        if isinstance(kind, str) and "const" not in inner and "$ref" not in inner:
            out = dict(inner)
            out["type"] = [kind, "null"]
            if "enum" in inner:
                out["enum"] = [*inner["enum"], None]
            return out
        return super().nullable_schema(schema)

    def literal_schema(self, schema: core_schema.LiteralSchema) -> JsonSchemaValue:
        out = super().literal_schema(schema)
        out.pop("title", None)
        return out


def schema_of(model: type[BaseModel], mode: str = "validation") -> dict[str, Any]:
    """The compact JSON Schema of ``model`` (``validation`` for inputs, ``serialization`` for results)."""
    return model.model_json_schema(schema_generator=CompactJsonSchema, mode=mode)  # type: ignore[arg-type]
