"""The guard's per-person rate limit forgets people it has not seen for a whole window."""

from __future__ import annotations

from core.stages import GuardStage
from core.types import ReplyKind
from tests.conftest import ask, make_message


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_people_quiet_for_a_window_are_forgotten(engine_factory) -> None:
    engine, _ = await engine_factory(
        ["ok"], bot={"rate_limit_messages": 2, "rate_limit_window_s": 60}
    )
    guard = engine.pipeline.get("guard")
    assert isinstance(guard, GuardStage)
    clock = Clock()
    guard.clock = clock
    for user in range(30):
        await ask(engine, make_message("oi", user=str(user)))
        clock.now += 1
    assert guard.tracked == 30
    clock.now += 60 - 15  # users 0..14 have been quiet for over a window
    await ask(engine, make_message("oi de novo", user="100"))
    assert guard.tracked == 16  # users 15..29 and the newcomer
    clock.now += 120
    await ask(engine, make_message("mais uma", user="101"))
    assert guard.tracked == 1


async def test_forgetting_does_not_lift_a_limit_within_its_window(engine_factory) -> None:
    engine, _ = await engine_factory(
        ["ok"], bot={"rate_limit_messages": 2, "rate_limit_window_s": 60}
    )
    guard = engine.pipeline.get("guard")
    assert isinstance(guard, GuardStage)
    clock = Clock()
    guard.clock = clock
    kinds = []
    for i in range(3):
        # Other people come and go in between; the limited person stays limited.
        await ask(engine, make_message("oi", user=f"other-{i}"))
        kinds.append([r.kind for r in (await ask(engine, make_message("x", user="9"))).sent])
        clock.now += 10
    assert kinds == [[ReplyKind.ANSWER], [ReplyKind.ANSWER], [ReplyKind.NOTICE]]
    clock.now += 61
    again = await ask(engine, make_message("voltei", user="9"))
    assert [r.kind for r in again.sent] == [ReplyKind.ANSWER]
