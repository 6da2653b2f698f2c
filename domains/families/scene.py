"""3D scene building through tool calls; the verifier replays the calls and checks the scene graph.

Tools: add_object(name, shape), transform(name, position?, rotation?, scale?), set_material(name, color),
group(name, members), list_scene(). z is up; a group's position offsets its members (world = group + local).
Constraints (hidden): each object's shape, colour, world position (+-0.01), scale, rotation, parent group, and
the exact object count. The final message must be exactly "Done.". Wrong argument types never pass.
Difficulty 0-1: explicit object lists; 2-3: a description whose positions must be computed, more objects.

    .venv/bin/python -m domains sample scene.row --seed 0 --difficulty 2
"""
from __future__ import annotations

import json
import math
import random
from typing import Any, Callable, Iterator

from domains.chat import tools_prompt
from domains.core import Reward, Task, ToolEnv, ToolError, tool
from domains.replay import ReplayDomain

SHAPES = ["cube", "sphere", "cylinder", "cone", "plane"]
COLORS = ["red", "green", "blue", "yellow", "white", "black", "orange", "purple", "gray"]
VEC3 = {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3}
NAME = {"type": "string", "pattern": r"[a-z][a-z0-9_]{0,31}"}
TOOLS = [
    tool("add_object", "Add an object at the origin.", {"name": NAME, "shape": {"type": "string", "enum": SHAPES}}),
    tool("transform", "Set position, rotation (degrees) and/or uniform scale of an object or group.",
         {"name": NAME, "position": VEC3, "rotation": VEC3, "scale": {"type": "number", "minimum": 0.01}}, ["name"]),
    tool("set_material", "Set the colour of an object.", {"name": NAME, "color": {"type": "string", "enum": COLORS}}),
    tool("group", "Create a group containing objects.", {"name": NAME, "members": {"type": "array", "items": NAME, "minItems": 1}}),
    tool("list_scene", "Show all objects and groups.", {}),
]
SYSTEM = ("You build 3D scenes by calling tools (z is up). When the scene is complete, reply exactly: Done.\n"
          "Tools:\n" + tools_prompt(TOOLS))
TOL = 0.01


class Scene:
    def __init__(self, initial: dict | None = None):
        self.nodes: dict[str, dict] = json.loads(json.dumps(initial or {}))

    def impls(self) -> dict[str, Callable[..., str]]:
        return {"add_object": self.add_object, "transform": self.transform, "set_material": self.set_material,
                "group": self.group, "list_scene": self.list_scene}

    def _get(self, name: str) -> dict:
        if name not in self.nodes:
            raise ToolError(f"no object or group named {name!r}; call list_scene to see the names")
        return self.nodes[name]

    def add_object(self, name: str, shape: str) -> str:
        if name in self.nodes:
            raise ToolError(f"name {name!r} is already used")
        self.nodes[name] = {"kind": "object", "shape": shape, "position": [0, 0, 0], "rotation": [0, 0, 0],
                            "scale": 1, "color": "gray", "parent": None}
        return f"added {shape} {name}"

    def transform(self, name: str, position=None, rotation=None, scale=None) -> str:
        n = self._get(name)
        if position is None and rotation is None and scale is None:
            raise ToolError("give at least one of position, rotation, scale")
        if position is not None:
            n["position"] = list(position)
        if rotation is not None:
            if n["kind"] == "group":
                raise ToolError("groups can only be moved (position), not rotated")
            n["rotation"] = list(rotation)
        if scale is not None:
            if n["kind"] == "group":
                raise ToolError("groups can only be moved (position), not scaled")
            n["scale"] = scale
        return f"transformed {name}"

    def set_material(self, name: str, color: str) -> str:
        n = self._get(name)
        if n["kind"] != "object":
            raise ToolError(f"{name} is a group; set the material of its members")
        n["color"] = color
        return f"{name} is {color}"

    def group(self, name: str, members: list[str]) -> str:
        if name in self.nodes:
            raise ToolError(f"name {name!r} is already used")
        for m in members:
            if self._get(m)["parent"] is not None:
                raise ToolError(f"{m} is already in group {self.nodes[m]['parent']}")
        if len(set(members)) != len(members):
            raise ToolError("members must be distinct")
        self.nodes[name] = {"kind": "group", "position": [0, 0, 0], "parent": None}
        for m in members:
            self.nodes[m]["parent"] = name
        return f"grouped {', '.join(members)} as {name}"

    def list_scene(self) -> str:
        """One compact line per node (short observations keep small-context models in budget)."""
        if not self.nodes:
            return "(empty scene)"
        out = []
        for n, v in sorted(self.nodes.items()):
            pos = _fmt(v["position"])
            grp = f" in {v['parent']}" if v.get("parent") else ""
            if v["kind"] == "group":
                out.append(f"{n}: group at {pos}{grp}")
            else:
                out.append(f"{n}: {v['color']} {v['shape']} at {pos} scale {v['scale']:g} rotation {_fmt(v['rotation'])}{grp}")
        return "\n".join(out)

    def world(self, name: str) -> list[float]:
        p, node, seen = [0.0, 0.0, 0.0], self.nodes[name], set()
        while node is not None and id(node) not in seen:
            seen.add(id(node))
            p = [a + b for a, b in zip(p, node["position"])]
            node = self.nodes.get(node["parent"]) if node["parent"] else None
        return p


def _close(a: list[float], b: list[float]) -> bool:
    return all(abs(x - y) <= TOL for x, y in zip(a, b))


def check(c: dict, s: Scene) -> bool:
    """One constraint against the scene."""
    t, n = c["type"], s.nodes.get(c.get("name", ""))
    if t == "count":
        return sum(1 for v in s.nodes.values() if v["kind"] == "object") == c["n"]
    if n is None:
        return False
    if t == "object":
        return n["kind"] == "object" and n["shape"] == c["shape"]
    if t == "color":
        return n.get("color") == c["color"]
    if t == "position":
        return _close(s.world(c["name"]), c["xyz"])
    if t == "rotation":
        return _close(n.get("rotation", [0, 0, 0]), c["xyz"])
    if t == "scale":
        return abs(n.get("scale", 1) - c["value"]) <= TOL
    if t == "parent":
        return n["parent"] == c["group"]
    raise ValueError(f"unknown constraint {t!r}")


# ---- scene specs ---------------------------------------------------------------------------------------------
# A spec: {"objects": [{name, shape, color?, position?, rotation?, scale?}], "groups": [{name, members, position?}],
#          "text": high-level description or None (then an explicit list is generated), "initial": {...} or None}

def _r2(x: float) -> float:
    return round(x, 2) + 0.0  # + 0.0: no "-0.0" in the JSON


def _fmt(v) -> str:
    return "(" + ", ".join(f"{x:g}" for x in v) + ")"


def _explicit(spec: dict) -> str:
    parts = []
    for o in spec["objects"]:
        s = f"a {o.get('color', '') + ' ' if 'color' in o else ''}{o['shape']} named {o['name']}"
        if "position" in o:
            s += f" at {_fmt(o['position'])}"
        if "scale" in o:
            s += f" with scale {o['scale']:g}"
        if "rotation" in o:
            s += f" rotated {_fmt(o['rotation'])} degrees"
        parts.append(s)
    text = "Add " + "; ".join(parts) + "."
    for g in spec.get("groups", []):
        text += f" Group {', '.join(g['members'])} as {g['name']}"
        text += f" and move the group to {_fmt(g['position'])}." if "position" in g else "."
    return text


def _names(rng: random.Random, base: str, k: int) -> list[str]:
    return [f"{base}{i + 1}" for i in range(k)]


def _attrs(rng: random.Random, d: int, o: dict, levels=((), ("color",), ("color", "position"),
                                                      ("color", "position", "scale", "rotation"))) -> dict:
    for a in levels[d]:
        if a == "color":
            o["color"] = rng.choice(COLORS)
        elif a == "position":
            o["position"] = [rng.randint(-5, 5) for _ in range(3)]
        elif a == "scale":
            o["scale"] = rng.choice([0.5, 1.5, 2, 3])
        elif a == "rotation":
            o["rotation"] = [0, 0, rng.choice([45, 90, 180])]
    return o


def single(rng, d):
    """One object; more attributes (colour, position, scale, rotation) with difficulty."""
    return {"objects": [_attrs(rng, d, {"name": rng.choice(["box", "ball", "post", "tip", "tile"]), "shape": rng.choice(SHAPES)})]}


def pair(rng, d):
    """Two objects with attributes."""
    return {"objects": [_attrs(rng, d, {"name": n, "shape": rng.choice(SHAPES)}) for n in ("left", "right")]}


def _set(attr):
    def make(rng, d):
        k = (1, 2, 3, 5)[d]
        objs = []
        for n in _names(rng, rng.choice(["obj", "item", "part"]), k):
            o = {"name": n, "shape": rng.choice(SHAPES)}
            if attr == "color":
                o["color"] = rng.choice(COLORS)
            elif attr == "position":
                o["position"] = [rng.randint(-9, 9) for _ in range(3)]
            elif attr == "scale":
                o["scale"] = rng.choice([0.25, 0.5, 2, 2.5, 4])
            else:
                o["rotation"] = [rng.choice([0, 30, 90]), 0, rng.choice([45, 90, 270])]
            objs.append(o)
        return {"objects": objs}
    make.__doc__ = f"{(1, 2, 3, 5)} objects, each with a {attr}."
    return make


def row(rng, d):
    """Objects in a row along x with a spacing (positions computed from the description at d>=2)."""
    k, sp, shape, color = (2, 3, 4, 6)[d], rng.choice([1, 1.5, 2, 3]), rng.choice(SHAPES[:4]), rng.choice(COLORS)
    x0 = rng.randint(-3, 3)
    objs = [{"name": n, "shape": shape, "color": color, "position": [_r2(x0 + i * sp), 0, 0]}
            for i, n in enumerate(_names(rng, "r", k))]
    text = (f"Add {k} {color} {shape}s named r1..r{k} in a row along the x axis: r1 at ({x0}, 0, 0), each next one "
            f"{sp:g} further along +x.") if d >= 2 else None
    return {"objects": objs, "text": text}


def column(rng, d):
    """A vertical column of objects (z spacing)."""
    k, sp, shape = (2, 3, 4, 6)[d], rng.choice([1, 2, 2.5]), rng.choice(["cube", "cylinder"])
    objs = [{"name": n, "shape": shape, "position": [0, 0, _r2(i * sp)]} for i, n in enumerate(_names(rng, "c", k))]
    text = f"Add {k} {shape}s named c1..c{k} stacked along z: c1 at the origin, each next one {sp:g} higher." if d >= 2 else None
    return {"objects": objs, "text": text}


def grid(rng, d):
    """A rows x cols grid of objects in the xy plane."""
    r, c = ((1, 2), (2, 2), (2, 3), (3, 3))[d]
    sp, shape = rng.choice([1, 2, 3]), rng.choice(SHAPES[:4])
    objs = [{"name": f"g{i}_{j}", "shape": shape, "position": [j * sp, i * sp, 0]} for i in range(r) for j in range(c)]
    text = (f"Add a grid of {shape}s named g<row>_<col> for rows 0..{r - 1} and cols 0..{c - 1}; g<row>_<col> is at "
            f"(col*{sp}, row*{sp}, 0).") if d >= 2 else None
    return {"objects": objs, "text": text}


def circle(rng, d):
    """Objects evenly on a circle (positions rounded to 2 decimals)."""
    k, rad = (2, 3, 4, 6)[d], rng.choice([2, 3, 4])
    objs = [{"name": n, "shape": "sphere", "position": [_r2(rad * math.cos(2 * math.pi * i / k)),
                                                       _r2(rad * math.sin(2 * math.pi * i / k)), 0]}
            for i, n in enumerate(_names(rng, "p", k))]
    text = (f"Add {k} spheres named p1..p{k} evenly on a circle of radius {rad} around the origin in the xy plane; "
            f"p1 on the +x axis, then counter-clockwise. Round coordinates to 2 decimals.") if d >= 2 else None
    return {"objects": objs, "text": text}


def stack(rng, d):
    """Cubes of different scales stacked on the ground (each rests on the one below)."""
    k = (2, 2, 3, 4)[d]
    sizes = [rng.choice([0.5, 1, 2]) for _ in range(k)]
    objs, z = [], 0.0
    for n, s in zip(_names(rng, "s", k), sizes):
        objs.append({"name": n, "shape": "cube", "scale": s, "position": [0, 0, _r2(z + s / 2)]})
        z += s
    text = (f"Stack {k} cubes named s1..s{k} (s1 at the bottom) on the ground plane z=0, centred on the z axis, each "
            f"resting on the one below. A cube of scale s is s tall. Scales: "
            + ", ".join(f"s{i + 1}={s:g}" for i, s in enumerate(sizes)) + ".") if d >= 2 else None
    return {"objects": objs, "text": text}


def group_pair(rng, d):
    """Objects put into a group."""
    k = (2, 2, 3, 4)[d]
    objs = [_attrs(rng, min(d, 2), {"name": n, "shape": rng.choice(SHAPES)}) for n in _names(rng, "m", k)]
    return {"objects": objs, "groups": [{"name": rng.choice(["set", "bundle", "cluster"]), "members": [o["name"] for o in objs]}]}


def group_move(rng, d):
    """Objects grouped, then the group moved (members keep their local offsets)."""
    k = (1, 2, 3, 4)[d]
    objs = [{"name": n, "shape": rng.choice(SHAPES[:4]), "position": [i, 0, 0]} for i, n in enumerate(_names(rng, "u", k))]
    gpos = [rng.randint(-5, 5) for _ in range(3)]
    return {"objects": objs, "groups": [{"name": "unit", "members": [o["name"] for o in objs], "position": gpos}]}


def _fixed(builder, text_fn):
    """Fixed structures: d0 shapes+positions, d1 + colours, d2 description only, d3 description + group."""
    def make(rng, d):
        objs, params = builder(rng)
        if d == 0:
            objs = [{k: v for k, v in o.items() if k != "color"} for o in objs]
        spec = {"objects": objs, "text": text_fn(params) if d >= 2 else None}
        if d == 3:
            gpos = [rng.randint(-5, 5), rng.randint(-5, 5), 0]
            spec["groups"] = [{"name": "model", "members": [o["name"] for o in objs], "position": gpos}]
            spec["text"] += f" Then group all its parts as model and move the group to {_fmt(gpos)}."
        return spec
    make.__doc__ = builder.__doc__
    return make


def _table(rng):
    """A table: a flat top and four cylinder legs."""
    w, h, c = rng.choice([1, 1.5, 2]), rng.choice([1, 2]), rng.choice(["white", "black", "orange"])
    objs = [{"name": "top", "shape": "cube", "color": c, "position": [0, 0, h]}]
    for n, (sx, sy) in zip(["leg1", "leg2", "leg3", "leg4"], [(1, 1), (-1, 1), (-1, -1), (1, -1)]):
        objs.append({"name": n, "shape": "cylinder", "color": c, "position": [sx * w, sy * w, _r2(h / 2)]})
    return objs, (w, h, c)


def _snowman(rng):
    """A snowman: three white spheres stacked, shrinking upwards."""
    base = rng.choice([1, 2, 3])
    scales = [base, _r2(base * 0.75), _r2(base * 0.5)]
    objs, z = [], 0.0
    for n, s in zip(["bottom", "middle", "head"], scales):
        objs.append({"name": n, "shape": "sphere", "color": "white", "scale": s, "position": [0, 0, _r2(z + s / 2)]})
        z += s
    return objs, scales


def _traffic(rng):
    """A traffic light: a pole and red/yellow/green lamps."""
    h = rng.choice([3, 4, 5])
    objs = [{"name": "pole", "shape": "cylinder", "color": "black", "position": [0, 0, _r2(h / 2)]}]
    for i, (n, c) in enumerate([("lamp_red", "red"), ("lamp_yellow", "yellow"), ("lamp_green", "green")]):
        objs.append({"name": n, "shape": "sphere", "color": c, "position": [0, 0.5, _r2(h - 0.5 * i)]})
    return objs, h


def _stairs(rng):
    """A staircase of cubes rising along +x."""
    k, st = rng.choice([3, 4, 5]), rng.choice([0.5, 1])
    objs = [{"name": f"step{i + 1}", "shape": "cube", "color": "gray", "position": [i, 0, _r2(i * st)]} for i in range(k)]
    return objs, (k, st)


def _mirror(rng):
    """An object and its mirror image across the yz plane."""
    p, shape, c = [rng.randint(1, 6), rng.randint(-4, 4), rng.randint(0, 4)], rng.choice(SHAPES[:4]), rng.choice(COLORS)
    return [{"name": "orig", "shape": shape, "color": c, "position": p},
            {"name": "twin", "shape": shape, "color": c, "position": [-p[0], p[1], p[2]]}], (p, shape, c)


def _fence(rng):
    """A fence of posts alternating two colours."""
    k, c1, c2 = rng.choice([3, 4, 5]), *rng.sample(COLORS, 2)
    objs = [{"name": f"post{i + 1}", "shape": "cylinder", "color": c1 if i % 2 == 0 else c2, "position": [i * 2, 0, 0]}
            for i in range(k)]
    return objs, (k, c1, c2)


def _checker(rng):
    """A checkerboard of planes, black where row+col is even."""
    n = rng.choice([2, 3])
    objs = [{"name": f"sq{i}_{j}", "shape": "plane", "color": "black" if (i + j) % 2 == 0 else "white",
             "position": [j, i, 0]} for i in range(n) for j in range(n)]
    return objs, n


def _solar(rng):
    """A sun and planets along +x."""
    k = rng.choice([2, 3])
    dists = sorted(rng.sample([2, 3, 4, 5, 6, 8], k))
    objs = [{"name": "sun", "shape": "sphere", "color": "yellow", "scale": 2, "position": [0, 0, 0]}]
    objs += [{"name": f"planet{i + 1}", "shape": "sphere", "color": "blue", "position": [dd, 0, 0]} for i, dd in enumerate(dists)]
    return objs, dists


FIXED = [
    ("table", _table, lambda p: f"Build a table: a {p[2]} cube named top at height z={p[1]}, and four {p[2]} cylinders "
     f"leg1..leg4 at (x, y) = ({p[0]:g}, {p[0]:g}), (-{p[0]:g}, {p[0]:g}), (-{p[0]:g}, -{p[0]:g}), ({p[0]:g}, -{p[0]:g}) "
     f"whose centres are at half the table height."),
    ("snowman", _snowman, lambda p: f"Build a snowman of white spheres bottom, middle, head with scales {p[0]:g}, "
     f"{p[1]:g}, {p[2]:g} (a sphere of scale s is s tall), stacked on the ground z=0 on the z axis, each resting on the one below."),
    ("traffic_light", _traffic, lambda p: f"Build a traffic light: a black cylinder pole centred at (0, 0, {p / 2:g}); "
     f"spheres lamp_red (red), lamp_yellow (yellow), lamp_green (green) at x=0, y=0.5, with lamp_red at z={p} and "
     f"each next lamp 0.5 lower."),
    ("staircase", _stairs, lambda p: f"Build a staircase of {p[0]} gray cubes step1..step{p[0]}: step i at x=i-1, y=0, "
     f"z=(i-1)*{p[1]:g}."),
    ("mirror", _mirror, lambda p: f"Add a {p[2]} {p[1]} named orig at {_fmt(p[0])} and a copy named twin mirrored "
     f"across the yz plane (x -> -x)."),
    ("fence", _fence, lambda p: f"Build a fence of {p[0]} cylinders post1..post{p[0]} along +x from the origin, 2 apart; "
     f"odd-numbered posts {p[1]}, even-numbered posts {p[2]}."),
    ("checkerboard", _checker, lambda p: f"Build a {p}x{p} checkerboard of planes sq<row>_<col> (rows and cols from 0) at "
     f"(col, row, 0); black where row+col is even, white otherwise."),
    ("solar", _solar, lambda p: "Build a solar system: a yellow sphere sun with scale 2 at the origin, and blue spheres "
     + ", ".join(f"planet{i + 1} at x={dd}" for i, dd in enumerate(p)) + " on the x axis."),
]


def _initial(rng: random.Random, k: int) -> dict:
    s = Scene()
    for i in range(k):
        n = f"{rng.choice(['a', 'b', 'c', 'd'])}{i + 1}"
        s.add_object(n, rng.choice(["cube", "sphere", "cone"]))
        s.transform(n, position=[rng.randint(-5, 5), rng.randint(-5, 5), 0])
        s.set_material(n, rng.choice(COLORS))
    return s.nodes


def _edit(kind):
    """Edit a pre-built scene the model must inspect with list_scene."""
    def make(rng, d):
        k = (2, 3, 5, 8)[d]
        init = _initial(rng, k)
        names = sorted(init)
        shapes = sorted({init[n]["shape"] for n in names})
        spec: dict[str, Any] = {"initial": init, "objects": [], "keep": {}}
        if kind == "recolor":
            shape = rng.choice(shapes)
            color = rng.choice([c for c in COLORS if all(init[n]["color"] != c for n in names if init[n]["shape"] == shape)])
            spec["text"] = f"The scene already has objects. Make every {shape} in it {color}; change nothing else."
            spec["keep"] = {n: {**init[n], "color": color} if init[n]["shape"] == shape else init[n] for n in names}
        elif kind == "relocate":
            a, b = rng.sample(names, 2)
            h = rng.choice([1, 2, 3])
            target = [init[b]["position"][0], init[b]["position"][1], init[b]["position"][2] + h]
            spec["text"] = f"The scene already has objects. Move {a} to be exactly {h} above {b} (same x and y); change nothing else."
            spec["keep"] = {n: {**init[n], "position": target} if n == a else init[n] for n in names}
        else:  # regroup
            shape = rng.choice(shapes)
            members = [n for n in names if init[n]["shape"] == shape]
            spec["text"] = f"The scene already has objects. Put every {shape} into a new group named bunch; change nothing else."
            spec["keep"] = {n: {**init[n], "parent": "bunch"} if n in members else init[n] for n in names}
            spec["groups"] = [{"name": "bunch", "members": members}]
        return spec
    make.__doc__ = f"Edit a pre-built scene: {kind}."
    return make


VARIANTS: dict[str, Callable[[random.Random, int], dict]] = {
    "single": single, "pair": pair, "colored_set": _set("color"), "positioned_set": _set("position"),
    "scaled_set": _set("scale"), "rotated_set": _set("rotation"), "row": row, "column": column, "grid": grid,
    "circle": circle, "stack": stack, "group_pair": group_pair, "group_move": group_move,
    **{n: _fixed(b, t) for n, b, t in FIXED},
    "recolor": _edit("recolor"), "relocate": _edit("relocate"), "regroup": _edit("regroup"),
}


def constraints_of(spec: dict) -> list[dict]:
    cs: list[dict] = []
    gpos = {g["name"]: g.get("position", [0, 0, 0]) for g in spec.get("groups", [])}
    parent = {m: g["name"] for g in spec.get("groups", []) for m in g["members"]}
    for o in spec["objects"]:
        n = o["name"]
        cs.append({"type": "object", "name": n, "shape": o["shape"]})
        if "color" in o:
            cs.append({"type": "color", "name": n, "color": o["color"]})
        local = o.get("position", [0, 0, 0])
        g = gpos.get(parent.get(n), [0, 0, 0])
        cs.append({"type": "position", "name": n, "xyz": [_r2(a + b) for a, b in zip(local, g)]})
        cs.append({"type": "scale", "name": n, "value": o.get("scale", 1)})
        cs.append({"type": "rotation", "name": n, "xyz": o.get("rotation", [0, 0, 0])})
        if n in parent:
            cs.append({"type": "parent", "name": n, "group": parent[n]})
    for n, node in spec.get("keep", {}).items():  # edited scenes: every object must end as specified
        cs.append({"type": "object", "name": n, "shape": node["shape"]})
        cs.append({"type": "color", "name": n, "color": node["color"]})
        cs.append({"type": "position", "name": n, "xyz": node["position"]})
        if node["parent"]:
            cs.append({"type": "parent", "name": n, "group": node["parent"]})
    cs.append({"type": "count", "n": len(spec["objects"]) + len(spec.get("keep", {}))})
    return cs


def plan(spec: dict) -> list[list[dict]]:
    """The oracle's tool calls, one assistant message per object / group / edit."""
    steps: list[list[dict]] = []
    if spec.get("initial"):
        steps.append([{"name": "list_scene", "arguments": {}}])
        init = spec["initial"]
        edits = []
        for n, node in spec["keep"].items():
            if node["color"] != init[n]["color"]:
                edits.append({"name": "set_material", "arguments": {"name": n, "color": node["color"]}})
            if node["position"] != init[n]["position"]:
                edits.append({"name": "transform", "arguments": {"name": n, "position": node["position"]}})
        if edits:
            steps.append(edits)
    for o in spec["objects"]:
        calls = [{"name": "add_object", "arguments": {"name": o["name"], "shape": o["shape"]}}]
        if "color" in o:
            calls.append({"name": "set_material", "arguments": {"name": o["name"], "color": o["color"]}})
        tr = {k: o[k] for k in ("position", "rotation", "scale") if k in o}
        if tr:
            calls.append({"name": "transform", "arguments": {"name": o["name"], **tr}})
        steps.append(calls)
    for g in spec.get("groups", []):
        calls = [{"name": "group", "arguments": {"name": g["name"], "members": g["members"]}}]
        if "position" in g:
            calls.append({"name": "transform", "arguments": {"name": g["name"], "position": g["position"]}})
        steps.append(calls)
    return steps


class SceneDomain(ReplayDomain):
    family = "scene"

    def __init__(self, variant: str):
        self.variant, self.make = variant, VARIANTS[variant]
        self.name, self.description = f"scene.{variant}", (self.make.__doc__ or "").strip()

    def build(self, rng: random.Random, difficulty: int) -> dict:
        spec = self.make(rng, difficulty)
        text = spec.get("text") or _explicit(spec)
        steps = plan(spec)
        return {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}],
                "tools": TOOLS, "max_turns": 2 * len(steps) + 4, "constraints": constraints_of(spec),
                "meta": {"plan": steps, "initial": spec.get("initial") or {}}}

    def new_state(self, task: Task) -> Scene:
        return Scene(task.meta.get("initial"))

    def oracle(self, task: Task) -> Iterator[dict]:
        for calls in task.meta["plan"]:
            yield {"role": "assistant", "content": "", "tool_calls": calls}
        yield {"role": "assistant", "content": "Done."}

    def progress(self, task: Task, state: Scene) -> float:
        return sum(check(c, state) for c in task.constraints) / len(task.constraints)

    def judge(self, task: Task, env: ToolEnv, state: Scene, final: str) -> Reward:
        failed = [c for c in task.constraints if not check(c, state)]
        frac = 1 - len(failed) / len(task.constraints)
        done = final.strip() == "Done."
        details = {"failed_constraints": failed[:10], "final_is_done": done}
        ok = not failed and done
        return Reward(1.0 if ok else frac * (1.0 if done else 0.5), ok, details)

    def format_ok(self, task: Task, text: str) -> bool:
        return text.strip() == "Done."


def domains() -> list[SceneDomain]:
    return [SceneDomain(v) for v in VARIANTS]
