"""The choice among methods: the recommended estimate (``method="auto"``) and why."""

from heroeval.choice.auto import Recommendation, recommend

__all__ = ["Recommendation", "recommend"]
