"""The one error a tool raises for a problem the caller can fix; the server turns it into a structured error."""

from __future__ import annotations

from typing import Any


class ToolInputError(Exception):
    """A user-fixable problem with a tool's input; the server turns it into a structured tool error."""

    def __init__(self, code: str, message: str, fix: str = "", **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.fix = fix
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.fix:
            out["fix"] = self.fix
        if self.details:
            out["details"] = self.details
        return out
