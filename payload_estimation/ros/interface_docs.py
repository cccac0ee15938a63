"""The nodes' services and topics as the running code creates them, and the tables of docs/ros_interface.md.

:func:`introspect` starts each node in-process (its own rclpy context, in each configuration that creates
different entities: ``robot`` set and ``robot: ''``) and asks the ROS graph what it created; rclpy's own
entities (parameter services, ``~/get_type_description``, ``/rosout``, ``/parameter_events``) are left out.
:func:`render_interface_docs` rewrites each ``<!-- interface: NODE -->`` ... ``<!-- /interface -->`` block
of the docs from that: kind, name and type come from the code; the notes column is kept from the docs (a
new entity gets :data:`UNDESCRIBED`, a removed one disappears). ``tools/gen_ros_docs.py`` runs both;
``test/integration/test_ros_interface_docs.py`` fails when the docs and the code differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import import_module

DOCS_NAMESPACE = "/pe_docs"
"""Namespace the nodes are started in for introspection (names are shown relative to it)."""

NODES = {
    "payload_estimator": ("estimator_node", "PayloadEstimatorNode"),
    "payload_sampler": ("sampler_node", "PayloadSamplerNode"),
    "collision_monitor": ("monitor_node", "CollisionMonitorNode"),
    "sim_node": ("sim_node", "SimNode"),
}
"""Node name -> (module in payload_estimation.ros, class)."""

CONFIGURATIONS = ({"robot": "lwr4"}, {"robot": ""})
"""Parameter sets each node is started with: a node waiting for ``robot_description`` subscribes to it and
creates some entities only once a model is there (the union of both is documented)."""

KINDS = ("sub", "pub", "srv", "client")
RCLPY_SERVICES = ("describe_parameters", "get_parameter_types", "get_parameters", "get_type_description",
                  "list_parameters", "set_parameters", "set_parameters_atomically")
RCLPY_TOPICS = ("/rosout", "/parameter_events")
UNDESCRIBED = "(not described yet: new in the code, say what it does here)"
START, END = "<!-- interface: ", "<!-- /interface -->"
HEADER = "| kind | name | type | notes |\n|---|---|---|---|"


@dataclass(frozen=True)
class Entity:
    """One service, client, publisher or subscription: ``kind`` (sub, pub, srv, client), ``name`` as the
    docs show it (``~/x`` in the node's namespace, ``x`` relative, ``/x`` absolute), ``type`` (pkg/Type)."""

    kind: str
    name: str
    type: str


def _type(graph_type: str) -> str:
    """``std_srvs/srv/Trigger`` -> ``std_srvs/Trigger``."""
    parts = graph_type.split("/")
    return f"{parts[0]}/{parts[-1]}" if len(parts) == 3 else graph_type


def _relative(name: str, node: str, namespace: str) -> str:
    own = f"{namespace}/{node}/"
    if name.startswith(own):
        return "~/" + name[len(own):]
    if name.startswith(namespace + "/"):
        return name[len(namespace) + 1:]
    return name


def node_entities(node) -> set[Entity]:
    """What ``node`` (a running rclpy Node) created, from the ROS graph, without rclpy's own entities."""
    name, ns = node.get_name(), node.get_namespace()
    queries = {"sub": node.get_subscriber_names_and_types_by_node, "pub": node.get_publisher_names_and_types_by_node,
               "srv": node.get_service_names_and_types_by_node, "client": node.get_client_names_and_types_by_node}
    out = set()
    for kind, query in queries.items():
        for full, types in query(name, ns):
            rel = _relative(full, name, ns)
            if full in RCLPY_TOPICS or (kind in ("srv", "client") and rel.removeprefix("~/") in RCLPY_SERVICES):
                continue
            out.update(Entity(kind, rel, _type(t)) for t in types)
    return out


def introspect(nodes=tuple(NODES)) -> dict[str, set[Entity]]:
    """Node name -> every entity it creates over :data:`CONFIGURATIONS`. Each node runs in its own rclpy
    context, created and shut down here; call with the process's DDS isolated (``ros.domain.isolate``)."""
    import rclpy
    from rclpy.parameter import Parameter

    found: dict[str, set[Entity]] = {}
    for name in nodes:
        module, cls = NODES[name]
        node_cls = getattr(import_module(f"payload_estimation.ros.{module}"), cls)
        found[name] = set()
        for params in CONFIGURATIONS:
            ctx = rclpy.Context()
            ctx.init(args=[])
            try:
                node = node_cls(context=ctx, namespace=DOCS_NAMESPACE,
                                parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
                try:
                    found[name] |= node_entities(node)
                finally:
                    node.destroy_node()
            finally:
                ctx.try_shutdown()
    return found


def _split_names(cell: str) -> list[str]:
    """Names of a table cell: "`a/b`, `…/c`" -> ["a/b", "a/c"] (``…/`` repeats the previous name's folder)."""
    names: list[str] = []
    for part in cell.split(","):
        nm = part.strip().strip("`")
        if nm.startswith("…/") and names:
            nm = names[-1].rsplit("/", 1)[0] + nm[1:]
        if nm:
            names.append(nm)
    return names


def documented(text: str) -> dict[str, dict[Entity, str]]:
    """Node -> {entity: notes} of the interface tables in ``text``, in table order."""
    out: dict[str, dict[Entity, str]] = {}
    pos = 0
    while (i := text.find(START, pos)) >= 0:
        j = text.index("-->", i)
        node = text[i + len(START):j].strip()
        k = text.index(END, j)
        rows = out.setdefault(node, {})
        for line in text[j + 3:k].splitlines():
            cells = line.strip().strip("|").split("|", 3)
            if len(cells) != 4 or cells[0].strip() not in KINDS:
                continue
            kind, names, typ, notes = (c.strip() for c in cells)
            for nm in _split_names(names):
                rows[Entity(kind, nm, typ)] = notes
        pos = k
    return out


def interface_table(entities: set[Entity], notes: dict[Entity, str]) -> str:
    """The Markdown table of ``entities``: by kind, then the docs' order, then name; adjacent rows of one
    kind, type and notes merged (names joined); notes from ``notes`` (else :data:`UNDESCRIBED`)."""
    order = {e: i for i, e in enumerate(notes)}
    rows = sorted(entities, key=lambda e: (KINDS.index(e.kind), order.get(e, math.inf), e.name))
    merged: list[tuple[str, list[str], str, str]] = []
    for e in rows:
        note = notes.get(e, UNDESCRIBED)
        if merged and merged[-1][0] == e.kind and merged[-1][2] == e.type and merged[-1][3] == note != UNDESCRIBED:
            merged[-1][1].append(e.name)
        else:
            merged.append((e.kind, [e.name], e.type, note))
    lines = [f"| {k} | {', '.join(f'`{n}`' for n in names)} | {t} | {note} |" for k, names, t, note in merged]
    return "\n".join([HEADER, *lines])


def render_interface_docs(text: str, found: dict[str, set[Entity]]) -> str:
    """``text`` with each interface block rebuilt from ``found`` (KeyError for a node not introspected)."""
    notes = documented(text)
    out, pos = [], 0
    while (i := text.find(START, pos)) >= 0:
        j = text.index("-->", i)
        node = text[i + len(START):j].strip()
        k = text.index(END, j)
        out.append(text[pos:j + 3] + "\n" + interface_table(found[node], notes.get(node, {})) + "\n")
        pos = k
    out.append(text[pos:])
    return "".join(out)


__all__ = ["CONFIGURATIONS", "DOCS_NAMESPACE", "Entity", "NODES", "UNDESCRIBED", "documented", "interface_table",
           "introspect", "node_entities", "render_interface_docs"]
