"""The pipeline's composition rules, with real stages built from functions."""

from __future__ import annotations

import pytest

from core.pipeline import CallNext, Pipeline, TurnContext, stage


def recorder(name: str, log: list[str], *, stop: bool = False) -> object:
    @stage(name)
    async def run(ctx: TurnContext, call_next: CallNext) -> None:
        log.append(f"{name}>")
        if not stop:
            await call_next()
        log.append(f"<{name}")

    return run


async def run_pipeline(pipeline: Pipeline) -> None:
    # The stages below never touch the context, so a bare object stands in for it.
    await pipeline.run(object())  # type: ignore[arg-type]


async def test_stages_wrap_the_rest_in_order() -> None:
    log: list[str] = []
    pipeline = Pipeline([recorder("a", log), recorder("b", log), recorder("c", log)])  # type: ignore[list-item]
    await run_pipeline(pipeline)
    assert log == ["a>", "b>", "c>", "<c", "<b", "<a"]


async def test_a_stage_that_does_not_call_next_stops_the_chain() -> None:
    log: list[str] = []
    pipeline = Pipeline([recorder("a", log), recorder("b", log, stop=True), recorder("c", log)])  # type: ignore[list-item]
    await run_pipeline(pipeline)
    assert log == ["a>", "b>", "<b", "<a"]


async def test_insert_before_after_replace_remove() -> None:
    log: list[str] = []
    pipeline = Pipeline([recorder("a", log), recorder("c", log)])  # type: ignore[list-item]
    pipeline.add(recorder("b", log), before="c")  # type: ignore[arg-type]
    pipeline.add(recorder("d", log), after="c")  # type: ignore[arg-type]
    assert pipeline.names == ["a", "b", "c", "d"]
    pipeline.replace("b", recorder("b", log, stop=True))  # type: ignore[arg-type]
    pipeline.remove("a")
    assert pipeline.names == ["b", "c", "d"]
    await run_pipeline(pipeline)
    assert log == ["b>", "<b"]


def test_duplicate_and_unknown_names_are_clear_errors() -> None:
    pipeline = Pipeline([recorder("a", [])])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="already"):
        pipeline.add(recorder("a", []))  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="no stage named 'zzz'"):
        pipeline.remove("zzz")
