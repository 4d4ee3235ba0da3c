"""The composition root's promise: services never import it, and do not import each other round.

A stop-gap until the layers are declared as import contracts.
"""

from __future__ import annotations

import grimp
import pytest

SERVICES = ("watchkeeper.decide", "watchkeeper.notify", "watchkeeper.watch")
RUNTIME = "watchkeeper.runtime"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("watchkeeper")


def test_no_service_module_imports_the_runtime(graph: grimp.ImportGraph) -> None:
    modules = {m for package in SERVICES for m in graph.find_descendants(package) | {package}}
    chains = {m: graph.find_shortest_chain(importer=m, imported=RUNTIME) for m in modules}
    assert {m: chain for m, chain in chains.items() if chain} == {}


def test_services_and_the_runtime_form_no_cycle(graph: grimp.ImportGraph) -> None:
    names = (*SERVICES, RUNTIME)
    both_ways = [
        (a, b)
        for a in names
        for b in names
        if a < b
        and graph.chain_exists(importer=a, imported=b, as_packages=True)
        and graph.chain_exists(importer=b, imported=a, as_packages=True)
    ]
    assert both_ways == []


def test_signing_is_shared_not_borrowed(graph: grimp.ImportGraph) -> None:
    webhook = "watchkeeper.notify.channels.webhook"
    assert not graph.chain_exists(importer=webhook, imported="watchkeeper.notify.ops")
