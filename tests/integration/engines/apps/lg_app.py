"""A LangGraph app as a user writes one, for the engine tests: nothing of watchkeeper in it.

``python -m lg_app CHECKPOINTER_URL THREAD MODE GATE`` runs one graph on one thread with
LangGraph's SQLite or PostgreSQL checkpointer. Nodes that wait do so until the file
``GATE.N`` exists, so the test decides when each step ends.
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict):
    done: int


def waiting_node(gate: str, number: int) -> Any:
    def node(state: State) -> State:
        while not Path(f"{gate}.{number}").exists():
            time.sleep(0.02)
        return {"done": state["done"] + 1}

    return node


def ask(state: State) -> State:
    interrupt("approve the draft?")
    return state


def boom(state: State) -> State:
    raise ValueError("cannot parse the page")


def build(mode: str, gate: str) -> StateGraph:
    graph = StateGraph(State)
    names = {"hang": ["w1"], "steps": ["w1", "w2", "w3"], "ask": ["ask"], "boom": ["boom"]}[mode]
    for number, name in enumerate(names, start=1):
        action = {"ask": ask, "boom": boom}.get(name) or waiting_node(gate, number)
        graph.add_node(name, action)
    graph.add_edge(START, names[0])
    for first, second in itertools.pairwise(names):
        graph.add_edge(first, second)
    graph.add_edge(names[-1], END)
    return graph


@contextlib.contextmanager
def checkpointer(url: str) -> Iterator[Any]:
    """LangGraph's SQLite or PostgreSQL checkpointer for ``url``, its tables made."""
    if url.startswith("sqlite:///"):
        from langgraph.checkpoint.sqlite import SqliteSaver

        connection = sqlite3.connect(url.removeprefix("sqlite:///"), check_same_thread=False)
        try:
            saver = SqliteSaver(connection)
            saver.setup()
            yield saver
        finally:
            connection.close()
        return
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        yield saver


def main(url: str, thread: str, mode: str, gate: str) -> None:
    config = {"configurable": {"thread_id": thread}}
    with checkpointer(url) as saver:
        build(mode, gate).compile(checkpointer=saver).invoke({"done": 0}, config)


if __name__ == "__main__":
    main(*sys.argv[1:5])
