"""LoadGuard: a read raced by a write of the same owner is reported, others are not."""

from core.storage.loading import LoadGuard


def test_only_a_write_of_the_same_owner_during_the_read_counts() -> None:
    guard = LoadGuard()
    guard.wrote("a")  # before the read: irrelevant
    token = guard.begin("a")
    guard.wrote("b")
    assert guard.end("a", token) is False
    token = guard.begin("a")
    guard.wrote("a")
    assert guard.end("a", token) is True
    assert guard._loading == {} and guard._written == {}


def test_overlapping_reads_of_one_owner() -> None:
    guard = LoadGuard()
    first = guard.begin("a")
    guard.wrote("a")
    second = guard.begin("a")  # began after that write
    assert guard.end("a", second) is False
    assert guard.end("a", first) is True
    assert guard._loading == {} and guard._written == {}


async def test_load_reports_a_write_landing_while_the_read_is_awaited() -> None:
    guard = LoadGuard()

    async def read(write_meanwhile: str | None) -> list[str]:
        if write_meanwhile is not None:
            guard.wrote(write_meanwhile)
        return ["row"]

    assert await guard.load("a", read(None)) == (["row"], False)
    assert await guard.load("a", read("b")) == (["row"], False)
    assert await guard.load("a", read("a")) == (["row"], True)
    assert guard._loading == {} and guard._written == {}
