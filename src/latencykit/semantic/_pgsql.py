"""The SQL of `PgVectorStore` (no I/O): its schema, lookup, upsert and maintenance statements.

Built once per store from the table name and the settings (``psycopg.sql`` composes the
identifiers; every value is a bound parameter, or an int / float formatted as a literal).
The lookup and the add share one nearest-row CTE: the partition's rows are counted through
the ``(scope, fingerprint, vkey)`` B-tree up to ``exact_limit + 1``; under the limit the
partition is scanned exactly (``ORDER BY (embedding <=> v) + 0`` keeps the planner off the
HNSW index), at or above it the HNSW index is used. Both branches carry the partition in
their ``WHERE``; the count gates them with a one-time filter, so only one runs.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Optional, Union

__all__ = ["MIN_PGVECTOR", "ITERATIVE_SCAN", "SCHEMA_LOCK", "Sql", "lock_key", "version_of"]

MIN_PGVECTOR = (0, 5, 0)
"""The oldest pgvector with HNSW indexes."""
ITERATIVE_SCAN = (0, 8, 0)
"""The first pgvector with iterative index scans (``hnsw.iterative_scan``)."""
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,40}$")


class Sql:
    """The statements of one store (no I/O): built once from the table name and the settings."""

    def __init__(self, psycopg: Any, table: str, dim: int, ttl: Optional[float], m: int, ef_construction: int) -> None:
        parts = table.split(".")
        if len(parts) > 2 or not all(_NAME.match(p) for p in parts):
            raise ValueError(f"table must be a name or schema.name of letters, digits and _ (up to 41 each), got {table!r}")
        sql = psycopg.sql
        self.table = table
        name = parts[-1]
        t = sql.Identifier(*parts)
        u = sql.Identifier(*parts[:-1], f"{name}_used")
        f = {"t": t, "u": u, "dim": sql.Literal(dim)}
        live = sql.SQL("") if ttl is None else sql.SQL("AND created_at > now() - {} * interval '1 second'").format(sql.Literal(float(ttl)))
        self.schema = [
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {t} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, scope text NOT NULL,"
                " fingerprint bytea NOT NULL, vkey bytea NOT NULL, embedding vector({dim}) NOT NULL, payload bytea NOT NULL,"
                " meta jsonb NOT NULL DEFAULT '{{}}', created_at timestamptz NOT NULL DEFAULT now(), UNIQUE (scope, fingerprint, vkey))"
            ).format(**f),
            # the payload arrives compressed or encrypted: PostgreSQL's own compression would be wasted work
            sql.SQL("ALTER TABLE {t} ALTER COLUMN payload SET STORAGE EXTERNAL").format(**f),
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {u} (id bigint PRIMARY KEY REFERENCES {t} (id) ON DELETE CASCADE,"
                " used_at timestamptz NOT NULL DEFAULT now())"
            ).format(**f),
            sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} USING hnsw (embedding vector_cosine_ops) WITH (m = {m}, ef_construction = {efc})").format(
                i=sql.Identifier(f"{name}_hnsw"), t=t, m=sql.Literal(m), efc=sql.Literal(ef_construction)
            ),
            sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} (created_at)").format(i=sql.Identifier(f"{name}_created"), t=t),
        ]
        self.column_type = sql.SQL(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = to_regclass({}) AND attname = 'embedding'"
        ).format(sql.Literal(".".join(f'"{p}"' for p in parts)))  # names are [A-Za-z0-9_]: quoting is safe
        # The partition's size, counted through the B-tree up to the exact-scan limit, picks the
        # branch; the other one is never run (a one-time filter on the count).
        nearest = (
            "WITH size AS (SELECT count(*) AS n FROM (SELECT 1 FROM {t} WHERE scope = %(scope)s AND fingerprint = %(fp)s LIMIT %(probe)s) p),"
            " best AS ((SELECT id, embedding <=> %(v)b AS d FROM {t} WHERE scope = %(scope)s AND fingerprint = %(fp)s {live}"
            " AND (SELECT n FROM size) < %(probe)s ORDER BY (embedding <=> %(v)b) + 0 LIMIT 1)"  # + 0: never the HNSW index
            " UNION ALL (SELECT id, embedding <=> %(v)b AS d FROM {t} WHERE scope = %(scope)s AND fingerprint = %(fp)s {live}"
            " AND (SELECT n FROM size) >= %(probe)s ORDER BY embedding <=> %(v)b LIMIT 1))"
        )
        self.search = sql.SQL(
            nearest + ", hit AS (SELECT best.id, best.d, e.payload, e.meta FROM best JOIN {t} e ON e.id = best.id WHERE best.d <= %(maxd)s),"
            " touch AS (UPDATE {u} SET used_at = now() FROM hit WHERE {u}.id = hit.id AND {u}.used_at < now() - %(res)s * interval '1 second')"
            " SELECT payload, meta, d FROM hit"
        ).format(live=live, **f)
        self.lock = sql.SQL("SELECT pg_advisory_xact_lock(%s)")
        self.add = sql.SQL(
            nearest.replace("{live}", "") + ", arg AS (SELECT %(p)b::bytea AS p, %(m)s::jsonb AS m),"
            " upd AS (UPDATE {t} SET payload = arg.p, meta = arg.m, created_at = now() FROM best, arg"
            " WHERE {t}.id = best.id AND best.d <= %(samed)s RETURNING {t}.id),"
            " ins AS (INSERT INTO {t} (scope, fingerprint, vkey, embedding, payload, meta)"
            " SELECT %(scope)s, %(fp)s, %(vkey)s, %(v)b, arg.p, arg.m FROM arg WHERE NOT EXISTS (SELECT 1 FROM upd)"
            " ON CONFLICT (scope, fingerprint, vkey) DO UPDATE SET payload = EXCLUDED.payload, meta = EXCLUDED.meta, created_at = now()"
            " RETURNING id)"
            " INSERT INTO {u} (id) SELECT id FROM upd UNION ALL SELECT id FROM ins ON CONFLICT (id) DO UPDATE SET used_at = now()"
        ).format(**f)
        self.try_lock = sql.SQL("SELECT pg_try_advisory_xact_lock(%s)")
        self.expire = None if ttl is None else sql.SQL(
            "WITH gone AS (DELETE FROM {t} WHERE created_at <= now() - {ttl} * interval '1 second' RETURNING 1) SELECT count(*) FROM gone"
        ).format(ttl=sql.Literal(float(ttl)), **f)  # fmt: skip
        self.evict = sql.SQL(
            "WITH over AS (SELECT count(*) - %(max)s AS k FROM {t}),"
            " victims AS (SELECT id FROM {u} ORDER BY used_at, id LIMIT GREATEST((SELECT k FROM over), 0)),"
            " gone AS (DELETE FROM {t} USING victims WHERE {t}.id = victims.id RETURNING 1) SELECT count(*) FROM gone"
        ).format(**f)
        self.count = sql.SQL("SELECT count(*) FROM {t} WHERE true {live}").format(live=live, **f)
        self.clear_all = sql.SQL("TRUNCATE {u}, {t}").format(**f)
        self.clear_scope = sql.SQL("DELETE FROM {t} WHERE scope = %s").format(**f)
        self.maintain_lock = lock_key(b"maintain", table)

    def settings(self, ef_search: int, iterative: bool, timeout_ms: int, scope: str) -> str:
        """What a lookup sets, for the session (``SET``) or its transaction (``SET LOCAL``); integers only: safe to format."""
        out = f"SET {scope}hnsw.ef_search = {int(ef_search)}; SET {scope}synchronous_commit = off; SET {scope}statement_timeout = {int(timeout_ms)}"
        return out + (f"; SET {scope}hnsw.iterative_scan = strict_order" if iterative else "")


def lock_key(*parts: Union[str, bytes]) -> int:
    """A signed 64-bit advisory-lock key."""
    h = hashlib.blake2b(digest_size=8)
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(4, "big") + b)
    return int.from_bytes(h.digest(), "big", signed=True)


def version_of(text: str) -> tuple[int, ...]:
    """``"0.6.2"`` -> ``(0, 6, 2)``."""
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


SCHEMA_LOCK = lock_key(b"latencykit.semantic.pgvector.schema")
"""The advisory lock held while a schema is created (so that concurrent first uses do not race)."""
