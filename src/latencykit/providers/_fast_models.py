"""`Plan`: the SDK's own model of the commonest stream event, built in one step: checked, not assumed.

For every event of a stream the SDK turns the event's JSON into its model through the client's
``_process_response_data``: ``construct_type`` resolves the discriminated union of event types,
then walks each field's annotation and builds each nested model. For an Anthropic text delta
(``content_block_delta`` holding a ``text_delta``, nine events in ten) that is ~7 µs, where
setting the same object's state directly takes ~1 µs. On a short async stream that difference
is most of the client CPU latencykit adds to the SDK's (#39).

A latencykit client overrides ``_process_response_data`` (the plug point every SDK stream calls
per event, `client_class`): a payload of a shape the provider names (`Plan`) is built directly;
anything else goes to the SDK, as does everything on a client with strict response validation.

A plan is made from the SDK itself, never written down: one probe payload goes through the
SDK's own ``_process_response_data``, and its result is taken apart level by level: the class,
the order of its ``__dict__`` (the model's field order, with the defaults of the fields the
payload leaves out), its ``__pydantic_fields_set__``, ``__pydantic_extra__`` and
``__pydantic_private__``. A field must hold the payload's own value (the same object: the SDK
passed it through unchanged) or a nested model (planned the same way); a default must be
immutable. Then the plan is *checked*: it builds every probe of the provider's list (other
text, an empty string, non-ASCII text, another index), and each result must equal the SDK's in
class and in every piece of state at every level. One difference, or any error, and the SDK
builds every event of that type, as before: nothing changes but the speed. This runs once per
SDK client class and event type, when the first client is made (~1 ms).

A payload is built by a plan only when it has exactly the probe's keys at every level, the
same ``type`` values (what the SDK's unions are discriminated by), and values of the probe's
types: anything else (a field a newer API adds, a ``null``) goes to the SDK.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Optional, Sequence

__all__ = ["Plan", "plan", "Plans", "plan_models", "process_response_data"]

logger = logging.getLogger("latencykit")

Plans = dict[int, tuple["Plan", ...]]
"""``id(cast_to)`` → the checked plans for that event type, one per shape (the ``cast_to``
objects are module-level types of the SDK: they live as long as the process)."""
Shapes = Mapping[Any, Sequence[Sequence[dict[str, Any]]]]
"""A provider's event types (the SDK's ``cast_to``) → its shapes, each a list of probe payloads."""

_IMMUTABLE = (type(None), bool, int, float, str)
_set = object.__setattr__


class Plan:
    """How the SDK builds one payload shape: its class, field order, defaults and nested plans."""

    __slots__ = ("cls", "keys", "order", "given", "nested", "kinds", "fixed", "defaults")

    def __init__(self, sdk_object: Any, payload: Mapping[str, Any]) -> None:
        """Take ``sdk_object`` (what the SDK built from ``payload``) apart; ``ValueError`` if it is not plain."""
        state = getattr(sdk_object, "__dict__", None)
        if type(payload) is not dict or type(state) is not dict:
            raise ValueError("not a model built from a JSON object")
        if getattr(sdk_object, "__pydantic_private__", _MISSING) is not None or getattr(sdk_object, "__pydantic_extra__", None) != {}:
            raise ValueError(f"{type(sdk_object).__name__}: private or extra state")
        given = getattr(sdk_object, "__pydantic_fields_set__", None)
        if type(given) is not set or given != set(payload):
            raise ValueError(f"{type(sdk_object).__name__}: fields set differ from the payload's keys")
        self.cls: type = type(sdk_object)
        self.keys = frozenset(payload)
        self.order = tuple(state)
        self.given = frozenset(given)
        self.nested: dict[str, Plan] = {}
        self.kinds: dict[str, type] = {}
        self.defaults: dict[str, Any] = {}
        self.fixed = tuple((k, payload[k]) for k in ("type",) if k in payload)
        for key in self.order:
            value = state[key]
            if key not in payload:
                if type(value) not in _IMMUTABLE:
                    raise ValueError(f"{self.cls.__name__}.{key}: a mutable default")
                self.defaults[key] = value
            elif type(payload[key]) is dict:
                self.nested[key] = Plan(value, payload[key])
            elif value is payload[key] and type(value) in _IMMUTABLE:
                self.kinds[key] = type(value)
            else:
                raise ValueError(f"{self.cls.__name__}.{key}: the SDK changed the value")
        if not self.keys <= set(self.order):
            raise ValueError(f"{self.cls.__name__}: a key that is no field")

    def build(self, data: Any) -> Any:
        """The SDK's object for ``data``, or ``None`` when ``data`` is not of this plan's shape."""
        if type(data) is not dict or data.keys() != self.keys:
            return None
        for key, want in self.fixed:
            if data[key] != want:
                return None
        state: dict[str, Any] = {}
        nested, kinds, defaults = self.nested, self.kinds, self.defaults
        for key in self.order:
            if key in defaults:
                state[key] = defaults[key]
                continue
            value = data[key]
            sub = nested.get(key)
            if sub is not None:
                value = sub.build(value)
                if value is None:
                    return None
            elif type(value) is not kinds[key]:
                return None
            state[key] = value
        cls: Any = self.cls
        obj = cls.__new__(cls)  # as the SDK's ``construct`` makes it
        _set(obj, "__dict__", state)
        _set(obj, "__pydantic_private__", None)
        _set(obj, "__pydantic_extra__", {})
        _set(obj, "__pydantic_fields_set__", set(self.given))
        return obj


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    """Whether two SDK objects are the same in class and every piece of state, at every level."""
    if type(a) is not type(b):
        return False
    state_a, state_b = getattr(a, "__dict__", _MISSING), getattr(b, "__dict__", _MISSING)
    if state_a is _MISSING:
        return bool(a == b) and state_b is _MISSING
    if type(state_a) is not dict or type(state_b) is not dict or list(state_a) != list(state_b):
        return False
    for slot in ("__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"):
        x, y = getattr(a, slot, _MISSING), getattr(b, slot, _MISSING)
        if type(x) is not type(y) or x != y:
            return False
    return all(_same(state_a[k], state_b[k]) for k in state_a)


def plan(sdk_build: Callable[[dict[str, Any]], Any], probes: Sequence[dict[str, Any]]) -> Optional[Plan]:
    """The plan for the shape of ``probes`` (one shape, varied values), checked against
    ``sdk_build`` (the SDK's own ``_process_response_data`` for one event type) on each of them;
    ``None`` where the SDK builds anything differently, or anything fails."""
    try:
        made = Plan(sdk_build(probes[0]), probes[0])
        for probe in probes:
            ours, theirs = made.build(probe), sdk_build(probe)
            if ours is None or not _same(ours, theirs):
                raise ValueError(f"the plan's {type(ours).__name__} differs from the SDK's {type(theirs).__name__}")
        return made
    except Exception as exc:
        logger.debug("latencykit: the SDK builds these events itself (%s)", exc)
        return None


_planned: set[type] = set()


def plan_models(client: Any) -> None:
    """Plan and check the event shapes of ``client``'s class (a latencykit client), once per
    class, with its SDK base's own ``_process_response_data``. A client that validates responses
    strictly plans nothing (it never uses the plans)."""
    cls = type(client)
    if cls in _planned or getattr(client, "_strict_response_validation", True):
        return
    _planned.add(cls)
    sdk = cls._lk_sdk_base._process_response_data
    plans: Plans = cls._lk_plans
    shapes: Shapes = cls._lk_shapes
    for cast_to, probe_lists in shapes.items():

        def sdk_build(data: dict[str, Any], cast_to: Any = cast_to) -> Any:
            return sdk(client, data=data, cast_to=cast_to, response=None)

        made = tuple(p for p in (plan(sdk_build, probes) for probes in probe_lists) if p is not None)
        if made:
            plans[id(cast_to)] = made


def process_response_data(self: Any, *, data: Any, cast_to: Any, response: Any) -> Any:
    """The SDK's ``_process_response_data``: a payload of a planned shape built directly, anything else by the SDK."""
    plans = type(self)._lk_plans.get(id(cast_to))
    if plans is not None and not self._strict_response_validation:
        for made in plans:
            obj = made.build(data)
            if obj is not None:
                return obj
    return type(self)._lk_sdk_base._process_response_data(self, data=data, cast_to=cast_to, response=response)
