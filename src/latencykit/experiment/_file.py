"""The experiment file (TOML): traffic, load, a server template and the strategies, checked whole.

```toml
name = "llama.cpp: the article's strategies"   # top-level keys: name, description, baseline, repeat, slo
slo = "ttft<=500ms"

[traffic]        # shape (a bench shape) or replay (JSONL), requests, seed, documents, exact_output, api
[load]           # concurrency or rate (a number or a list), arrivals, burstiness, duration, warmup, ramp, workers
[server]         # command with {port} {model} {args} ({host} {name} {python}), ready, ready_timeout, metrics,
                 # env, cwd, port, target, model, args, request_model, stop_timeout, sample_interval
[quality]        # prompts, max_tokens, temperature, file or set, scorer, grader, extra_body, enabled
[roofline]       # enabled, threads (the bandwidth probe's; default 1)
[[strategy]]     # name, description, model, args, env, command, base_url, target, request_model,
                 # claim, claim_metric, lossless, quality
```

Everything is validated before any server starts (`load_experiment`); a problem raises
`ExperimentFileError`, one line naming the file, the key and the value. Relative paths
(``replay``, ``quality.file``, ``server.cwd``) are relative to the file's folder, and the
server's working directory defaults to it, so ``model = "models/tiny.gguf"`` works from anywhere.
"""

from __future__ import annotations

import os
import re
import shlex
import string
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from ._claims import Claim, parse_claim
from ..bench._run import BenchConfig
from ._servers import find_executable, port_free
from ..bench._stats import parse_slo
from ..bench._targets import TARGETS, resolve_target

__all__ = ["ExperimentFileError", "ExperimentSpec", "QualitySpec", "RooflineSpec", "ServerTemplate", "StrategySpec", "load_experiment"]

PLACEHOLDERS = ("port", "model", "args", "host", "name", "python")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
Num = (int, float)


class ExperimentFileError(ValueError):
    """A bad experiment file: one line naming the file, the key and the value."""


@dataclass(frozen=True)
class ServerTemplate:
    """How a strategy's server is started, waited for and stopped."""

    command: Union[str, tuple[str, ...], None] = None
    ready: str = "/health"
    ready_timeout: float = 120.0
    metrics: Optional[str] = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Optional[str] = None
    port: int = 0
    """0 = a free port each start; else this fixed port (it must be free)."""
    target: str = "openai-compatible"
    model: Optional[str] = None
    args: str = ""
    request_model: Optional[str] = None
    stop_timeout: float = 10.0
    sample_interval: float = 0.25


@dataclass(frozen=True)
class QualitySpec:
    """The quality pass: fixed prompts at temperature 0, every strategy against the baseline."""

    enabled: bool = True
    prompts: int = 32
    max_tokens: int = 32
    temperature: float = 0.0
    file: Optional[str] = None
    scorer: Optional[str] = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    grader: Optional[str] = None
    """``module:function`` grading an answer against a prompt's known answer (`latencykit.experiment._tasks`)."""
    set: Optional[str] = None
    """A shipped prompt set with known answers (``basic``); ``file`` is then its path."""


@dataclass(frozen=True)
class RooflineSpec:
    """The physical limit beside every TPOT (`latencykit.experiment._roofline`): the bandwidth probe's threads."""

    enabled: bool = True
    threads: int = 1


@dataclass(frozen=True)
class StrategySpec:
    """One server configuration: what it changes from the template, or a running server's URL."""

    name: str
    description: str = ""
    model: Optional[str] = None
    args: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    command: Union[str, tuple[str, ...], None] = None
    base_url: Optional[str] = None
    target: Optional[str] = None
    request_model: Optional[str] = None
    claim: Optional[Claim] = None
    lossless: bool = False
    quality: bool = True


@dataclass
class ExperimentSpec:
    """A checked experiment file."""

    source: str
    """The file's path, or ``<dict>``."""
    name: str
    baseline: str
    repeat: int
    slos: tuple[str, ...]
    traffic: dict[str, Any]
    load: dict[str, Any]
    server: ServerTemplate
    quality: QualitySpec
    strategies: list[StrategySpec]
    folder: Path
    description: str = ""
    raw: dict[str, Any] = field(default_factory=dict)
    roofline: RooflineSpec = field(default_factory=RooflineSpec)

    def strategy(self, name: str) -> StrategySpec:
        """The strategy called ``name``."""
        return next(s for s in self.strategies if s.name == name)

    def target_kind(self, s: StrategySpec) -> str:
        """The bench target kind of ``s``."""
        return s.target or self.server.target

    def bench_config(self, s: StrategySpec, base_url: Optional[str], model: Optional[str]) -> BenchConfig:
        """The `BenchConfig` of one strategy's traffic (the same traffic and load for every strategy)."""
        t, lo = self.traffic, self.load
        return BenchConfig(target=self.target_kind(s), base_url=base_url, model=model, api=t.get("api"),
                           per_chunk_usage=t.get("per_chunk_usage"), exact_output=t.get("exact_output"),
                           traffic=t["shape"], requests=t.get("requests", 200), seed=t.get("seed", 0),
                           documents=t.get("documents", 4), replay=t.get("replay"), concurrency=lo.get("concurrency", ()),
                           rate=lo.get("rate", ()), arrivals=lo.get("arrivals", "poisson"),
                           burstiness=lo.get("burstiness", 1.0), duration=lo.get("duration"), warmup=lo.get("warmup", 0),
                           ramp=lo.get("ramp", 0.0), workers=lo.get("workers", 1), labels={"strategy": s.name},
                           slos=self.slos)  # fmt: skip

    def order(self, repeat: Optional[int] = None, only: Sequence[str] = ()) -> list[tuple[int, StrategySpec]]:
        """(round, strategy) in run order: the baseline first, then the file's order; every other round
        reversed (A B C, C B A, ...: ABBA, so a drift of the machine cancels out)."""
        chosen = [s for s in self.strategies if not only or s.name in only or s.name == self.baseline]
        chosen.sort(key=lambda s: s.name != self.baseline)
        out = []
        for r in range(repeat or self.repeat):
            out += [(r, s) for s in (chosen if r % 2 == 0 else chosen[::-1])]
        return out

    def argv(self, s: StrategySpec, port: Union[int, str]) -> list[str]:
        """The strategy's server command with every placeholder filled."""
        template = s.command if s.command is not None else self.server.command
        assert template is not None
        args = " ".join(a for a in (self.server.args, s.args) if a)
        values = {"port": str(port), "model": s.model or self.server.model, "args": args, "host": "127.0.0.1",
                  "name": s.name, "python": sys.executable}  # fmt: skip
        where = f"strategy {s.name!r}: " + ("command" if s.command is not None else "server.command")
        tokens = shlex.split(template) if isinstance(template, str) else list(template)
        out: list[str] = []
        for tok in tokens:
            if tok == "{args}":
                out += shlex.split(args)
                continue
            for _, fname, _, _ in string.Formatter().parse(tok):
                if fname is None:
                    continue
                if fname not in PLACEHOLDERS:
                    raise self.error(where, f"placeholder {{{fname}}} is not one of " + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS))
                if values[fname] is None:
                    raise self.error(where, f"placeholder {{{fname}}} is not filled (give {fname} = ... in [server] or in the strategy)")
            try:
                out.append(tok.format(**values))
            except (ValueError, IndexError) as exc:
                raise self.error(where, f"cannot fill {tok!r}: {exc}") from None
        if not out:
            raise self.error(where, "the command is empty")
        return out

    def env(self, s: StrategySpec) -> dict[str, str]:
        """The server's environment additions (template's, then the strategy's)."""
        return {**self.server.env, **s.env}

    def cwd(self) -> str:
        """The servers' working directory."""
        return str((self.folder / self.server.cwd).resolve()) if self.server.cwd else str(self.folder)

    def plan(self, repeat: Optional[int] = None, only: Sequence[str] = ()) -> list[str]:
        """The exact commands ``--dry-run`` prints, in run order."""
        lines = [f"# {self.name}: {len(self.order(repeat, only))} server run(s); PORT = a free 127.0.0.1 port chosen at start"
                 if not self.server.port else f"# {self.name}: port {self.server.port}"]  # fmt: skip
        for r, s in self.order(repeat, only):
            head = f"# round {r + 1}, strategy {s.name}" + (" (baseline)" if s.name == self.baseline else "")
            if s.base_url:
                lines += [head, f"# already running at {s.base_url} (not started)"]
                continue
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env(s).items())
            cmd = shlex.join(self.argv(s, self.server.port or "PORT"))
            lines += [head, f"cd {shlex.quote(self.cwd())} && " + (f"env {env} " if env else "") + cmd]
        return lines

    def error(self, key: str, problem: str) -> ExperimentFileError:
        """An `ExperimentFileError` naming this file and ``key``."""
        return ExperimentFileError(f"{self.source}: {key}: {problem}")


# -- parsing ---------------------------------------------------------------------------------

_TOP = {"name": str, "description": str, "baseline": str, "repeat": int, "slo": (str, list)}
_TRAFFIC = {"shape": str, "requests": int, "seed": int, "documents": int, "replay": str, "exact_output": bool,
            "per_chunk_usage": bool, "api": str}  # fmt: skip
_LOAD = {"concurrency": (int, list), "rate": (int, float, list), "arrivals": str, "burstiness": Num, "duration": Num,
         "warmup": int, "ramp": Num, "workers": int}  # fmt: skip
_SERVER = {"command": (str, list), "ready": str, "ready_timeout": Num, "metrics": str, "env": dict, "cwd": str,
           "port": int, "target": str, "model": str, "args": str, "request_model": str, "stop_timeout": Num,
           "sample_interval": Num}  # fmt: skip
_QUALITY = {"enabled": bool, "prompts": int, "max_tokens": int, "temperature": Num, "file": str, "scorer": str,
            "extra_body": dict, "grader": str, "set": str}  # fmt: skip
_ROOFLINE = {"enabled": bool, "threads": int}
_STRATEGY = {"name": str, "description": str, "model": str, "args": str, "env": dict, "command": (str, list),
             "base_url": str, "target": str, "request_model": str, "claim": str, "claim_metric": str, "lossless": bool,
             "quality": bool}  # fmt: skip
_TABLES: dict[str, dict[str, Any]] = {"traffic": _TRAFFIC, "load": _LOAD, "server": _SERVER, "quality": _QUALITY,
                                       "roofline": _ROOFLINE}


def _toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - 3.10
        import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]
    try:
        with path.open("rb") as f:
            data: dict[str, Any] = tomllib.load(f)
    except OSError as exc:
        raise ExperimentFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentFileError(f"{path}: not valid TOML: {exc}") from None
    return data


def _type_name(kinds: Any) -> str:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list", dict: "a table"}
    return " or ".join(dict.fromkeys(names[k] for k in kinds))


def _check(src: str, table: str, data: Any, schema: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ExperimentFileError(f"{src}: {table}: must be a table, got {data!r}")
    for key, value in data.items():
        where = f"{table}.{key}" if table else key
        if key not in schema:
            raise ExperimentFileError(f"{src}: {where}: unknown key (known: {', '.join(schema)})")
        kinds = schema[key] if isinstance(schema[key], tuple) else (schema[key],)
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            raise ExperimentFileError(f"{src}: {where}: must be {_type_name(schema[key])}, got {value!r}")
    return dict(data)


def _strings(src: str, where: str, value: Any) -> dict[str, str]:
    if not all(isinstance(v, str) for v in value.values()):
        raise ExperimentFileError(f"{src}: {where}: values must be strings, got {value!r}")
    return dict(value)


def _command(src: str, where: str, value: Any) -> Union[str, tuple[str, ...], None]:
    if value is None or isinstance(value, str):
        return value
    if not value or not all(isinstance(v, str) for v in value):
        raise ExperimentFileError(f"{src}: {where}: must be a string or a non-empty list of strings, got {value!r}")
    return tuple(value)


def _numbers(src: str, where: str, value: Any, kind: type) -> tuple[Any, ...]:
    items = value if isinstance(value, list) else [value]
    if not items or any(isinstance(v, bool) or not isinstance(v, (int, float) if kind is float else int) or v <= 0 for v in items):
        raise ExperimentFileError(f"{src}: {where}: must be a positive {'number' if kind is float else 'integer'} or a list of them, got {value!r}")
    return tuple(kind(v) for v in items)


def load_experiment(source: Union[str, os.PathLike[str], Mapping[str, Any]]) -> ExperimentSpec:
    """Parse and check an experiment file (or the same as a dict); `ExperimentFileError` on any problem."""
    if isinstance(source, Mapping):
        src, folder, data = "<dict>", Path.cwd(), dict(source)
    else:
        path = Path(source)
        src, folder, data = str(path), path.resolve().parent, _toml(path)
    top_schema: dict[str, Any] = {**_TOP, **{k: dict for k in _TABLES}, "strategy": list, "strategies": list}
    data = _check(src, "", data, top_schema)
    tables = {k: _check(src, k, data.get(k, {}), schema) for k, schema in _TABLES.items()}
    raw_strategies = data.get("strategy", data.get("strategies"))
    if not raw_strategies:
        raise ExperimentFileError(f"{src}: strategy: give at least one [[strategy]] (with a name)")

    def rel(p: str) -> str:
        return str((folder / p).resolve())

    traffic = tables["traffic"]
    if "replay" in traffic:
        traffic["replay"] = rel(traffic["replay"])
        if not Path(traffic["replay"]).is_file():
            raise ExperimentFileError(f"{src}: traffic.replay: no such file {traffic['replay']!r}")
        traffic.setdefault("shape", "replay")
    traffic.setdefault("shape", "chat")
    if traffic.get("api") not in (None, "openai", "anthropic"):
        raise ExperimentFileError(f"{src}: traffic.api: must be 'openai' or 'anthropic', got {traffic['api']!r}")
    load = tables["load"]
    if "concurrency" in load:
        load["concurrency"] = _numbers(src, "load.concurrency", load["concurrency"], int)
    if "rate" in load:
        load["rate"] = _numbers(src, "load.rate", load["rate"], float)

    s = tables["server"]
    server = ServerTemplate(command=_command(src, "server.command", s.get("command")), ready=s.get("ready", "/health"),
                            ready_timeout=float(s.get("ready_timeout", 120.0)), metrics=s.get("metrics"),
                            env=_strings(src, "server.env", s.get("env", {})), cwd=s.get("cwd"), port=s.get("port", 0),
                            target=s.get("target", "openai-compatible"), model=s.get("model"), args=s.get("args", ""),
                            request_model=s.get("request_model"), stop_timeout=float(s.get("stop_timeout", 10.0)),
                            sample_interval=float(s.get("sample_interval", 0.25)))  # fmt: skip
    for key in ("ready", "metrics"):
        value = getattr(server, key)
        if value is not None and not value.startswith("/"):
            raise ExperimentFileError(f"{src}: server.{key}: must be a path starting with '/', got {value!r}")
    for key in ("ready_timeout", "stop_timeout", "sample_interval"):
        if not getattr(server, key) > 0:
            raise ExperimentFileError(f"{src}: server.{key}: must be > 0 seconds, got {getattr(server, key)!r}")
    if not 0 <= server.port <= 65535:
        raise ExperimentFileError(f"{src}: server.port: must be 0..65535, got {server.port!r}")
    if server.target not in TARGETS:
        raise ExperimentFileError(f"{src}: server.target: must be one of {', '.join(TARGETS)}, got {server.target!r}")
    if server.cwd is not None and not (folder / server.cwd).is_dir():
        raise ExperimentFileError(f"{src}: server.cwd: no such folder {server.cwd!r}")

    q = tables["quality"]
    if "set" in q and "file" in q:
        raise ExperimentFileError(f"{src}: quality.set: give a set ({q['set']!r}) or a file ({q['file']!r}), not both")
    qfile = rel(q["file"]) if "file" in q else None
    if "set" in q:
        from ._tasks import builtin_set

        try:
            qfile = builtin_set(q["set"])
        except ValueError as exc:
            raise ExperimentFileError(f"{src}: quality.set: {exc}") from None
    quality = QualitySpec(enabled=q.get("enabled", True), prompts=q.get("prompts", 32), max_tokens=q.get("max_tokens", 32),
                          temperature=float(q.get("temperature", 0.0)), file=qfile, scorer=q.get("scorer"),
                          extra_body=dict(q.get("extra_body", {})), grader=q.get("grader"), set=q.get("set"))  # fmt: skip
    for key in ("prompts", "max_tokens"):
        if getattr(quality, key) < 1:
            raise ExperimentFileError(f"{src}: quality.{key}: must be >= 1, got {getattr(quality, key)!r}")
    if quality.file is not None and not Path(quality.file).is_file():
        raise ExperimentFileError(f"{src}: quality.file: no such file {q['file']!r}")
    if quality.file is not None:
        from ._tasks import expected_answers

        try:
            expected_answers(quality.file, quality.prompts)
        except ValueError as exc:
            raise ExperimentFileError(f"{src}: quality.{'set' if quality.set else 'file'}: {exc}") from None
    for key in ("scorer", "grader"):
        if getattr(quality, key) is not None:
            from ._quality import load_scorer

            try:
                load_scorer(getattr(quality, key))
            except ValueError as exc:
                raise ExperimentFileError(f"{src}: quality.{key}: {exc}") from None
    ro = tables["roofline"]
    roofline = RooflineSpec(enabled=ro.get("enabled", True), threads=ro.get("threads", 1))
    if roofline.threads < 1:
        raise ExperimentFileError(f"{src}: roofline.threads: must be >= 1, got {roofline.threads!r}")

    strategies: list[StrategySpec] = []
    for i, item in enumerate(raw_strategies):
        st = _check(src, f"strategy[{i + 1}]", item, _STRATEGY)
        name = st.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ExperimentFileError(f"{src}: strategy[{i + 1}].name: give a name of letters, digits and ._+- , got {name!r}")
        where = f"strategy {name!r}"
        if any(x.name == name for x in strategies):
            raise ExperimentFileError(f"{src}: {where}: the name is used twice")
        claim = None
        if "claim" in st:
            try:
                claim = parse_claim(st["claim"], st.get("claim_metric", "ttft:p50"))
            except ValueError as exc:
                raise ExperimentFileError(f"{src}: {where}: claim: {exc}") from None
        elif "claim_metric" in st:
            raise ExperimentFileError(f"{src}: {where}: claim_metric {st['claim_metric']!r} without a claim")
        target = st.get("target")
        if target is not None and target not in TARGETS:
            raise ExperimentFileError(f"{src}: {where}: target must be one of {', '.join(TARGETS)}, got {target!r}")
        if st.get("base_url") is not None and "command" in st:
            raise ExperimentFileError(f"{src}: {where}: give base_url (a running server) or command, not both")
        strategies.append(StrategySpec(name, st.get("description", ""), st.get("model"), st.get("args", ""),
                                       _strings(src, f"{where}: env", st.get("env", {})),
                                       _command(src, f"{where}: command", st.get("command")), st.get("base_url"), target,
                                       st.get("request_model"), claim, st.get("lossless", False), st.get("quality", True)))  # fmt: skip

    top = data
    baseline = top.get("baseline", strategies[0].name)
    if baseline not in [x.name for x in strategies]:
        raise ExperimentFileError(f"{src}: baseline: no strategy is called {baseline!r} (strategies: {', '.join(x.name for x in strategies)})")
    slos = tuple(top["slo"]) if isinstance(top.get("slo"), list) else ((top["slo"],) if "slo" in top else ())
    for text in slos:
        try:
            parse_slo(str(text))
        except ValueError as exc:
            raise ExperimentFileError(f"{src}: slo: {exc}") from None
    repeat = top.get("repeat", 1)
    if repeat < 1:
        raise ExperimentFileError(f"{src}: repeat: must be >= 1, got {repeat!r}")
    spec = ExperimentSpec(src, top.get("name", Path(src).stem), baseline, repeat, slos, traffic, load, server, quality,
                          strategies, folder, top.get("description", ""), data, roofline)  # fmt: skip
    _check_runnable(spec)
    return spec


def _check_runnable(spec: ExperimentSpec) -> None:
    """What can be known before any start: bench values, commands and their programs, the fixed port."""
    src = spec.source
    try:
        spec.bench_config(spec.strategies[0], None, None).levels()
    except ValueError as exc:
        raise ExperimentFileError(f"{src}: [traffic]/[load]: {exc}") from None
    for s in spec.strategies:
        kind = spec.target_kind(s)
        if s.base_url:
            try:
                resolve_target(kind, base_url=s.base_url, model=s.request_model or s.model, api=spec.traffic.get("api"))
            except ValueError as exc:
                raise ExperimentFileError(f"{src}: strategy {s.name!r}: {exc}") from None
            continue
        if kind in ("anthropic", "openai"):
            raise ExperimentFileError(f"{src}: strategy {s.name!r}: target {kind} is a hosted API; give base_url, not a server to start")
        if s.command is None and spec.server.command is None:
            raise ExperimentFileError(f"{src}: strategy {s.name!r}: no command (give server.command, or command or base_url in the strategy)")
        argv = spec.argv(s, 0)
        env = {**os.environ, **spec.env(s)}
        if find_executable(argv[0], env, spec.cwd()) is None:
            key = "command" if s.command is not None else "server.command"
            raise ExperimentFileError(f"{src}: strategy {s.name!r}: {key}: program {argv[0]!r} is not found")
    if spec.server.port and not port_free(spec.server.port):
        raise ExperimentFileError(f"{src}: server.port: port {spec.server.port} is already taken")


def with_overrides(spec: ExperimentSpec, *, repeat: Optional[int] = None) -> ExperimentSpec:
    """``spec`` with the command line's overrides."""
    return replace(spec, repeat=repeat) if repeat else spec
