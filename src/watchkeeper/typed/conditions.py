"""``status.conditions`` as the Kubernetes API conventions want them (metav1.Condition), on
a dict object or a typed ``CustomResource``: one entry per type, ``lastTransitionTime``
moved only when the status flips, ``observedGeneration`` the generation it was set from.

``set_condition`` says whether anything changed, so a caller writes the status only then:
setting the same condition on every reconcile costs no request."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Literal

import msgspec

from watchkeeper.typed.models import Condition

__all__ = ["ConditionStatus", "find_condition", "is_true", "set_condition"]

ConditionStatus = Literal["True", "False", "Unknown"]
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")  # metav1.Condition's


def _now() -> dt.datetime:
    """metav1.Time has whole seconds: a finer time would read back different."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _rfc3339(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _generation(obj: Any) -> int | None:
    """``metadata.generation`` of a dict object, or of a typed one (a ``wk.ObjectMeta``)."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else getattr(obj, "metadata", None)
    if isinstance(metadata, dict):
        generation = metadata.get("generation")
    else:
        generation = getattr(metadata, "generation", None)
    return generation if isinstance(generation, int) else None


def _dict_conditions(obj: dict[str, Any], create: bool) -> list[dict[str, Any]] | None:
    status = obj.get("status")
    if not isinstance(status, dict):
        if not create:
            return None
        status = obj["status"] = {}
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        if not create:
            return None
        conditions = status["conditions"] = []
    return conditions


def _typed_conditions(obj: Any) -> list[Condition]:
    status = getattr(obj, "status", None)
    conditions = getattr(status, "conditions", None)
    if not isinstance(conditions, list):
        raise TypeError(f"{type(obj).__name__} has no status.conditions list to hold a "
                        "condition (declare `conditions: wk.Conditions = []` in its status)")
    return conditions


def find_condition(obj: Any, type: str) -> Any:
    """The condition of this type (a dict, or a ``wk.Condition`` on a typed object), or
    None."""
    if isinstance(obj, dict):
        found = _dict_conditions(obj, create=False) or []
        return next((c for c in found if isinstance(c, dict) and c.get("type") == type), None)
    status = getattr(obj, "status", None)
    typed = getattr(status, "conditions", None) or []
    return next((c for c in typed if getattr(c, "type", None) == type), None)


def is_true(obj: Any, type: str) -> bool:
    """The condition exists and its status is "True" ("Unknown" and absent are not)."""
    cond = find_condition(obj, type)
    status = cond.get("status") if isinstance(cond, dict) else getattr(cond, "status", None)
    return status == "True"


def set_condition(
    obj: Any,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str = "",
    *,
    now: dt.datetime | None = None,
) -> bool:
    """Set (add or update) the condition ``type`` on ``obj`` in place; True if anything
    changed, so the caller knows whether the status needs writing.

    ``lastTransitionTime`` becomes ``now`` only when the status changes (or the condition
    is new); ``observedGeneration`` is ``metadata.generation``. ``reason`` must be
    CamelCase (``ReconcileFailed``), as the API server validates it."""
    if status not in ("True", "False", "Unknown"):
        raise ValueError(f"condition status must be 'True', 'False' or 'Unknown', not {status!r}")
    if not _REASON.match(reason) or len(reason) > 1024:
        raise ValueError(f"condition reason must be CamelCase (letters, digits, _ , :), "
                         f"not {reason!r}")
    when = now or _now()
    generation = _generation(obj)
    if isinstance(obj, dict):
        conditions = _dict_conditions(obj, create=True)
        assert conditions is not None
        return _set_dict(conditions, type, status, reason, message, generation, when)
    typed = _typed_conditions(obj)
    for i, cond in enumerate(typed):
        if cond.type != type:
            continue
        if (cond.status, cond.reason, cond.message, cond.observed_generation) == (
                status, reason, message, generation):
            return False
        moved = when if cond.status != status else cond.last_transition_time
        typed[i] = msgspec.structs.replace(
            cond, status=status, reason=reason, message=message,
            observed_generation=generation, last_transition_time=moved)
        return True
    typed.append(Condition(type=type, status=status, last_transition_time=when,
                                reason=reason, message=message,
                                observed_generation=generation))
    return True


def _set_dict(
    conditions: list[dict[str, Any]], type: str, status: str, reason: str, message: str,
    generation: int | None, when: dt.datetime,
) -> bool:
    new: dict[str, Any] = {"type": type, "status": status}
    if generation is not None:
        new["observedGeneration"] = generation
    new.update(lastTransitionTime=_rfc3339(when), reason=reason, message=message)
    for i, cond in enumerate(conditions):
        if not isinstance(cond, dict) or cond.get("type") != type:
            continue
        if cond.get("status") == status and cond.get("lastTransitionTime"):
            new["lastTransitionTime"] = cond["lastTransitionTime"]  # no transition
        if cond == new:
            return False
        conditions[i] = new
        return True
    conditions.append(new)
    return True
