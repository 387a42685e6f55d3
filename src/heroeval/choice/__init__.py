"""The choice among methods: the recommended estimate (``method="auto"``) and why."""

from heroeval.choice.auto import DEFAULT_RULE, AutoRule, choose, recommend
from heroeval.estimators.records import Recommendation

__all__ = ["DEFAULT_RULE", "AutoRule", "Recommendation", "choose", "recommend"]
