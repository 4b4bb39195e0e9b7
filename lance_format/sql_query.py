"""``LanceDataset.sql()``: the SELECT subset pylance's DataFusion queries are mostly used for.

pylance hands the statement to DataFusion. Here it is parsed with sqlglot and run with what
the dataset already has: the WHERE clause becomes the scanner's ``filter=``, value
expressions go through the expression evaluator of ``add_columns``
(:mod:`lance_format.evolution.sqlexpr`), GROUP BY with COUNT/SUM/AVG/MIN/MAX is
``pyarrow.Table.group_by``, ORDER BY is ``pyarrow.compute.sort_indices``. Joins,
subqueries, set operations, window functions, CTEs and HAVING raise
:class:`~lance_format.errors.NotSupportedError` naming the construct.

Output columns are named as DataFusion names them (``count(*)``, ``sum(dataset.a)``,
``dataset.a + Int64(1)``), so code that reads pylance's results by name reads ours too.
sqlglot is imported when a query is built, never when ``lance_format`` is imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError, NotSupportedError
from lance_format.evolution.sqlexpr import evaluate

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset

DEFAULT_TABLE = "dataset"  # pylance registers the dataset under this name unless table_name() says otherwise
_AGGREGATES = {"Count": "count", "Sum": "sum", "Avg": "mean", "Min": "min", "Max": "max"}
_BLOB_MODES = ("all_binary", "blobs_descriptions", "all_descriptions")
# DataFusion's display of binary operators (``<>`` shows as ``!=``).
_OPS = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Mod": "%", "EQ": "=", "NEQ": "!=", "LT": "<",
        "LTE": "<=", "GT": ">", "GTE": ">=", "And": "AND", "Or": "OR", "DPipe": "||", "Like": "LIKE", "ILike": "ILIKE"}
_REFUSED = {"Join": "JOIN", "Subquery": "subquery", "Window": "window function", "With": "WITH (common table "
            "expression)", "Having": "HAVING", "Lateral": "LATERAL", "Pivot": "PIVOT", "Qualify": "QUALIFY"}


@dataclass
class _Options:
    table_name: str = DEFAULT_TABLE
    with_row_id: bool = False
    with_row_addr: bool = False
    batch_size: int | None = None
    blob_handling: str = "blobs_descriptions"


class SqlQuery:
    """An executable SQL query, made by :meth:`SqlQueryBuilder.build` (pylance's ``lance.dataset.SqlQuery``)."""

    def __init__(self, dataset: LanceDataset, statement: str, options: _Options) -> None:
        self._dataset = dataset
        self._plan = _plan(statement, options, dataset.schema.names)
        self._options = options

    def to_batch_records(self) -> list[pa.RecordBatch]:
        """Run the query and return all result batches (eager, as pylance)."""
        table = _execute(self._dataset, self._plan, self._options)
        return list(table.to_batches(max_chunksize=self._options.batch_size))

    def to_stream_reader(self) -> pa.RecordBatchReader:
        """Run the query and return its batches as a ``pyarrow.RecordBatchReader``."""
        table = _execute(self._dataset, self._plan, self._options)
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=self._options.batch_size))

    def explain_plan(self, verbose: bool = False) -> str:
        """Describe how the query runs (our extra: pylance 14.0.2's ``SqlQuery`` has no plan method)."""
        p = self._plan
        lines = [f"Scan: {self._options.table_name} columns={p.scan_columns} filter={p.where!r}"]
        if p.aggregate:
            lines.append(f"Aggregate: group_by={[k for k, _ in p.keys]} aggregates={[(fn, arg or '*') for _, fn, arg in p.aggs]}")
        if p.order:
            lines.append(f"Sort: {[(o.sql, 'DESC' if o.desc else 'ASC') for o in p.order]}")
        if p.limit is not None or p.offset:
            lines.append(f"Limit: skip={p.offset} fetch={p.limit}")
        lines.append(f"Projection: {[o.name for o in p.outputs]}")
        return "\n".join(reversed(lines))


class SqlQueryBuilder:
    """Configures a SQL query on a dataset; returned by ``LanceDataset.sql`` (pylance's names and defaults)."""

    def __init__(self, dataset: LanceDataset, statement: str) -> None:
        if not isinstance(statement, str):
            raise InvalidInputError(f"sql() takes a SQL string, got {type(statement).__name__}")
        self._dataset = dataset
        self._statement = statement
        self._options = _Options()

    def table_name(self, table_name: str) -> SqlQueryBuilder:
        """Name the dataset is queried under (default ``"dataset"``)."""
        self._options.table_name = table_name
        return self

    def with_row_id(self, with_row_id: bool = True) -> SqlQueryBuilder:
        """Append the ``_rowid`` column to the result."""
        self._options.with_row_id = bool(with_row_id)
        return self

    def with_row_addr(self, with_row_addr: bool = True) -> SqlQueryBuilder:
        """Append the ``_rowaddr`` column to the result."""
        self._options.with_row_addr = bool(with_row_addr)
        return self

    def blob_handling(self, blob_handling: str) -> SqlQueryBuilder:
        """How blob columns come back; only pylance's default ``"blobs_descriptions"`` is supported."""
        if blob_handling not in _BLOB_MODES:
            raise InvalidInputError(f"blob_handling must be one of {_BLOB_MODES}, got {blob_handling!r}")
        if blob_handling != "blobs_descriptions":
            raise NotSupportedError(f"sql(): blob_handling={blob_handling!r} is not supported")
        self._options.blob_handling = blob_handling
        return self

    def batch_size(self, batch_size: int) -> SqlQueryBuilder:
        """Most rows per result batch."""
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise InvalidInputError(f"batch_size must be a positive integer, got {batch_size!r}")
        self._options.batch_size = batch_size
        return self

    def batch_size_bytes(self, batch_size_bytes: int) -> SqlQueryBuilder:
        """Approximate byte limit per scan batch (pylance's; not supported here)."""
        raise NotSupportedError("sql(): batch_size_bytes is not supported; use batch_size")

    def build(self) -> SqlQuery:
        """Parse and check the statement.

        Raises:
            InvalidInputError: the statement does not parse or names another table.
            NotSupportedError: joins, subqueries, window functions and the other constructs outside the subset.
        """
        return SqlQuery(self._dataset, self._statement, _Options(**vars(self._options)))


# --- planning ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Output:
    name: str
    kind: str  # "column", "expr", "key" (a GROUP BY key), "agg"
    source: str  # column name, SQL text, key column or aggregate column


@dataclass(frozen=True)
class _Order:
    sql: str
    desc: bool
    nulls_first: bool
    output: str | None  # the output column it sorts by, else an expression over the scanned rows


@dataclass
class _Plan:
    outputs: list[_Output]
    scan_columns: list[str] | None
    where: str | None
    aggregate: bool
    keys: list[tuple[str, str]] = field(default_factory=list)  # (key column, SQL text)
    aggs: list[tuple[str, str, str | None]] = field(default_factory=list)  # (out name, function, argument SQL)
    order: list[_Order] = field(default_factory=list)
    limit: int | None = None
    offset: int = 0
    distinct: bool = False


def _plan(statement: str, options: _Options, dataset_columns: list[str]) -> _Plan:
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        trees = sqlglot.parse(statement, dialect="postgres")  # postgres: DataFusion's default NULL ordering
    except SqlglotError as err:
        raise InvalidInputError(f"sql(): cannot parse {statement!r}: {err}") from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise NotSupportedError(f"sql(): expected one statement, got {len(trees)} in {statement!r}")
    tree = trees[0]
    if not isinstance(tree, exp.Select):
        raise NotSupportedError(f"sql(): only SELECT is supported, got {type(tree).__name__.upper()} in {statement!r}")
    for node in tree.walk():
        kind = type(node).__name__
        if kind in _REFUSED:
            raise NotSupportedError(f"sql(): {_REFUSED[kind]} is not supported (in {statement!r})")
        if isinstance(node, exp.Select) and node is not tree:
            raise NotSupportedError(f"sql(): subquery is not supported (in {statement!r})")
    qualifier = _check_from(tree, options.table_name, statement)
    for col in tree.find_all(exp.Column):
        if col.table and col.table.lower() not in {qualifier.lower(), options.table_name.lower()}:
            raise InvalidInputError(f"sql(): unknown table {col.table!r} in {col.sql()!r}")
        col.set("table", None)
        if not col.this.quoted:  # DataFusion folds unquoted identifiers to lower case
            col.set("this", exp.to_identifier(col.name.lower()))
    where = tree.args.get("where")
    group = tree.args.get("group")
    has_agg = any(type(n).__name__ in _AGGREGATES for n in tree.walk()) or group is not None
    for node in tree.walk():
        if isinstance(node, exp.AggFunc) and type(node).__name__ not in _AGGREGATES:
            raise NotSupportedError(f"sql(): aggregate {node.sql()!r} is not supported (COUNT, SUM, AVG, MIN, MAX are)")
    plan = _Plan(outputs=[], scan_columns=None, where=where.this.sql() if where is not None else None,
                 aggregate=has_agg, distinct=bool(tree.args.get("distinct")))
    if has_agg and (options.with_row_id or options.with_row_addr):
        raise NotSupportedError("sql(): with_row_id / with_row_addr with GROUP BY or aggregates is not supported")
    if group is not None:
        plan.keys = [(f"__key{i}", e.sql()) for i, e in enumerate(group.expressions)]
    star = False
    for item in tree.expressions:
        alias = item.alias if isinstance(item, exp.Alias) else None
        if alias and not item.args["alias"].quoted:
            alias = alias.lower()
        body = item.this if isinstance(item, exp.Alias) else item
        if isinstance(body, exp.Star):
            if has_agg:
                raise NotSupportedError("sql(): SELECT * with aggregates is not supported")
            star = True
            plan.outputs.append(_Output("*", "star", "*"))
            continue
        name = alias or (body.name if isinstance(body, exp.Column) else _display(body, qualifier))
        if has_agg:
            plan.outputs.append(_aggregate_output(plan, body, name, statement))
        elif isinstance(body, exp.Column):
            plan.outputs.append(_Output(name, "column", body.name))
        else:
            plan.outputs.append(_Output(name, "expr", body.sql()))
    order_by = tree.args.get("order")
    for i, ordered in enumerate(order_by.expressions if order_by is not None else []):
        plan.order.append(_order(plan, ordered, i, statement))
    plan.limit = _integer(tree.args.get("limit"), "LIMIT")
    plan.offset = _integer(tree.args.get("offset"), "OFFSET") or 0
    if not star:
        # Names that are not dataset columns are output aliases (ORDER BY x) or unknown (the evaluator says so).
        plan.scan_columns = [c for c in dataset_columns if c in {c.name for c in tree.find_all(exp.Column)}]
    return plan


def _check_from(tree: Any, table_name: str, statement: str) -> str:
    from sqlglot import exp

    source = tree.args.get("from_") or tree.args.get("from")
    if source is None:
        raise NotSupportedError(f"sql(): SELECT without FROM is not supported (in {statement!r})")
    table = source.this
    if not isinstance(table, exp.Table) or table.db or table.catalog:
        raise NotSupportedError(f"sql(): FROM must name the dataset as {table_name!r}, got {table.sql()!r}")
    if table.name.lower() != table_name.lower():
        raise InvalidInputError(f"sql(): table {table.name!r} not found; the dataset is queried as {table_name!r} "
                                "(set another name with table_name())")
    return str(table.alias or table.name)


def _register_aggregate(plan: _Plan, node: Any) -> str:
    """Add aggregate call ``node`` to the plan; returns its column in the aggregated table."""
    from sqlglot import exp

    arg, fn = node.this, _AGGREGATES[type(node).__name__]
    if isinstance(arg, exp.Star):
        fn, source = "count_all", None
    elif isinstance(arg, exp.Distinct):
        if fn != "count" or len(arg.expressions) != 1:
            raise NotSupportedError(f"sql(): {node.sql()!r} is not supported (COUNT(DISTINCT x) is)")
        fn, source = "count_distinct", arg.expressions[0].sql()
    else:
        source = arg.sql()
    col = f"__agg{len(plan.aggs)}"
    plan.aggs.append((col, fn, source))
    return col


def _aggregate_output(plan: _Plan, body: Any, name: str, statement: str) -> _Output:
    from sqlglot import exp

    if type(body).__name__ in _AGGREGATES:
        return _Output(name, "agg", _register_aggregate(plan, body))
    keys = {text: key for key, text in plan.keys}
    if body.sql() in keys:
        return _Output(name, "key", keys[body.sql()])

    def swap(node: Any) -> Any:  # an expression over aggregates and keys: evaluated after aggregating
        if type(node).__name__ in _AGGREGATES:
            return exp.column(_register_aggregate(plan, node))
        if node.sql() in keys:
            return exp.column(keys[node.sql()])
        if isinstance(node, exp.Column) and not node.name.startswith("__"):
            raise InvalidInputError(f"sql(): column {node.name!r} in {body.sql()!r} is neither a GROUP BY key nor "
                                    f"inside an aggregate (in {statement!r})")
        return node

    return _Output(name, "post", body.copy().transform(swap).sql())


def _order(plan: _Plan, ordered: Any, position: int, statement: str) -> _Order:
    from sqlglot import exp

    body, desc = ordered.this, bool(ordered.args.get("desc"))
    nulls_first = bool(ordered.args.get("nulls_first"))
    text = body.sql()
    target = None
    if isinstance(body, exp.Literal) and body.is_int:  # ORDER BY 2: the second output column
        number = int(body.name)
        if not 1 <= number <= len(plan.outputs) or any(o.kind == "star" for o in plan.outputs):
            raise NotSupportedError(f"sql(): ORDER BY {number} must number one of the listed output columns")
        return _Order(text, desc, nulls_first, plan.outputs[number - 1].name)
    for out in plan.outputs:
        if (isinstance(body, exp.Column) and body.name == out.name) or out.source == text or (
                out.kind == "agg" and _agg_sql(plan, out.source) == text) or (
                out.kind == "key" and dict(plan.keys).get(out.source) == text):
            target = out.name
            break
    if target is None and (plan.aggregate or plan.distinct):
        raise NotSupportedError(f"sql(): ORDER BY {text!r} must name an output column of an aggregate query")
    return _Order(text, desc, nulls_first, target)


def _agg_sql(plan: _Plan, column: str) -> str:
    for name, fn, arg in plan.aggs:
        if name == column:
            fn_sql = {"count_all": "COUNT", "mean": "AVG"}.get(fn, fn.upper())
            return f"{fn_sql}(*)" if fn == "count_all" else f"{fn_sql}({arg})"
    return ""


def _integer(node: Any, what: str) -> int | None:
    if node is None:
        return None
    value = node.expression if node.args.get("expression") is not None else node.this
    try:
        number = int(value.name) if value.is_int else -1
    except (AttributeError, ValueError):
        number = -1
    if number < 0:
        raise NotSupportedError(f"sql(): {what} must be a non-negative integer literal, got {value.sql()!r}")
    return number


def _display(node: Any, qualifier: str) -> str:
    """DataFusion's display name of an unaliased select expression."""
    from sqlglot import exp

    kind = type(node).__name__
    if isinstance(node, exp.Column):
        return f"{qualifier}.{node.name}"
    if isinstance(node, exp.Literal):
        if node.is_string:
            return f'Utf8("{node.this}")'
        return f"Int64({node.this})" if node.is_int else f"Float64({node.this})"
    if isinstance(node, exp.Boolean):
        return f"Boolean({str(node.this).lower()})"
    if isinstance(node, exp.Null):
        return "NULL"
    if isinstance(node, exp.Not):
        inner = node.this
        if isinstance(inner, exp.Is):
            return f"{_display(inner.this, qualifier)} IS NOT {_display(inner.expression, qualifier)}"
        return f"NOT {_display(inner, qualifier)}"
    if isinstance(node, exp.Is):
        word = "IS NOT" if node.args.get("negate") else "IS"
        return f"{_display(node.this, qualifier)} {word} {_display(node.expression, qualifier)}"
    if isinstance(node, exp.Neg):
        return f"(- {_display(node.this, qualifier)})"
    if isinstance(node, exp.Between):
        return (f"{_display(node.this, qualifier)} BETWEEN {_display(node.args['low'], qualifier)} AND "
                f"{_display(node.args['high'], qualifier)}")
    if isinstance(node, exp.In):
        return f"{_display(node.this, qualifier)} IN {', '.join(_display(e, qualifier) for e in node.expressions)}"
    if isinstance(node, exp.Distinct):
        return f"DISTINCT {', '.join(_display(e, qualifier) for e in node.expressions)}"
    if kind in _OPS:
        op = f"NOT {_OPS[kind]}" if node.args.get("negate") else _OPS[kind]  # a NOT LIKE 'x'
        return f"{_display(node.this, qualifier)} {op} {_display(node.expression, qualifier)}"
    if isinstance(node, exp.Paren):
        return _display(node.this, qualifier)  # DataFusion's names drop parentheses
    if isinstance(node, exp.Cast):
        return _display(node.this, qualifier)
    if isinstance(node, exp.Star):
        return "*"
    if isinstance(node, exp.Func):
        name = node.sql_name().lower() if not isinstance(node, exp.Anonymous) else str(node.this).lower()
        name = {"avg": "avg"}.get(name, name)
        args = [a for a in node.args.values() if isinstance(a, exp.Expression)]
        args += [e for e in node.expressions if e not in args]
        return f"{name}({','.join(_display(a, qualifier) for a in args)})"
    return str(node.sql())


# --- execution -----------------------------------------------------------------------


def _execute(dataset: LanceDataset, plan: _Plan, options: _Options) -> pa.Table:
    push_limit = not plan.order and not plan.aggregate and not plan.distinct
    rows = dataset.to_table(columns=plan.scan_columns, filter=plan.where,
                            limit=plan.limit if push_limit else None,
                            offset=(plan.offset or None) if push_limit else None,
                            with_row_id=options.with_row_id or None, with_row_address=options.with_row_addr or None)
    if plan.aggregate:
        table = _aggregate(rows, plan)
    else:
        table = _project(rows, plan, options)
    if plan.distinct:
        if len(set(table.column_names)) != table.num_columns:
            raise NotSupportedError("sql(): DISTINCT over repeated output names is not supported")
        table = table.group_by(table.column_names, use_threads=False).aggregate([])
    if plan.order:
        table = _sort(table, rows, plan)
    if not push_limit and (plan.offset or plan.limit is not None):
        table = table.slice(plan.offset, plan.limit)
    return table


def _project(rows: pa.Table, plan: _Plan, options: _Options) -> pa.Table:
    names: list[str] = []
    arrays: list[Any] = []
    specials = [c for c in ("_rowid", "_rowaddr") if c in rows.column_names]
    for out in plan.outputs:
        if out.kind == "star":
            for name in rows.column_names:
                if name not in specials:
                    names.append(name)
                    arrays.append(rows.column(name))
        elif out.kind == "column":
            if out.source not in rows.column_names:
                raise InvalidInputError(f"sql(): no column {out.source!r} in the dataset")
            names.append(out.name)
            arrays.append(rows.column(out.source))
        else:
            names.append(out.name)
            arrays.append(evaluate(rows, {"__value": out.source})["__value"])
    for name in specials:
        names.append(name)
        arrays.append(rows.column(name))
    return pa.Table.from_arrays(arrays, names=names)


def _aggregate(rows: pa.Table, plan: _Plan) -> pa.Table:
    exprs = {key: text for key, text in plan.keys}
    exprs.update({f"{name}_arg": arg for name, fn, arg in plan.aggs if arg is not None})
    values = evaluate(rows, exprs) if exprs else {}
    columns = dict(values)
    columns["__one"] = pa.nulls(rows.num_rows, pa.bool_())  # count(*) counts rows of any column
    work = pa.table(columns)
    specs: list[tuple[Any, ...]] = []
    for name, fn, _arg in plan.aggs:
        if fn == "count_all":
            specs.append(("__one", "count", pc.CountOptions(mode="all")))
        elif fn in ("count", "count_distinct"):
            specs.append((f"{name}_arg", fn, pc.CountOptions(mode="only_valid")))
        else:
            specs.append((f"{name}_arg", fn))
    keys = [k for k, _ in plan.keys]
    result = work.group_by(keys, use_threads=False).aggregate(specs)
    # pyarrow puts the key columns first or last depending on its version; aggregates keep their order.
    first = len(keys) if result.column_names[:len(keys)] == keys else 0
    produced = {name: result.column(first + i) for i, (name, _, _) in enumerate(plan.aggs)}
    produced.update({k: result.column(k) for k in keys})
    post = {f"__post{i}": o.source for i, o in enumerate(plan.outputs) if o.kind == "post"}
    if post:
        produced.update(evaluate(pa.table(produced), post))
    return pa.Table.from_arrays([produced[f"__post{i}" if o.kind == "post" else o.source]
                                 for i, o in enumerate(plan.outputs)], names=[o.name for o in plan.outputs])


def _sort(table: pa.Table, rows: pa.Table, plan: _Plan) -> pa.Table:
    # One null-flag key before each value key gives every ORDER BY key its own NULLS FIRST/LAST.
    work: dict[str, Any] = {}
    keys: list[tuple[str, str]] = []
    extra = {f"__order{i}": o.sql for i, o in enumerate(plan.order) if o.output is None}
    computed = evaluate(rows, extra) if extra else {}
    for i, o in enumerate(plan.order):
        col = table.column(o.output) if o.output is not None else computed[f"__order{i}"]
        work[f"n{i}"] = pc.is_null(col, nan_is_null=False)
        work[f"v{i}"] = col
        keys.append((f"n{i}", "descending" if o.nulls_first else "ascending"))
        keys.append((f"v{i}", "descending" if o.desc else "ascending"))
    order = pc.sort_indices(pa.table(work), sort_keys=keys)
    return table.take(order)

