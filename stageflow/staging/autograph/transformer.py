"""The source rewrites of AutoGraph: Python statements to calls of `operators`.

Each ``if``, ``while`` and ``for`` of a converted function becomes nested functions for its
parts (condition, branches, body) and two for its state, then one call::

    if x > 0:                      def ag__if_body_1():
        y = x * 2                      nonlocal y
    else:                              y = x * 2
        y = -x                     def ag__else_body_1(): ...
                                   def ag__get_state_1():
                                       return (ag__.ld(lambda: y, 'y'),)
                                   def ag__set_state_1(ag__values):
                                       nonlocal y
                                       (y,) = ag__values
                                   (y,) = ag__.if_stmt(x > 0, ag__if_body_1, ...)

The state is the names the statement binds (outside nested functions and classes), and
the attributes of names it assigns (``self.total``). A
``break`` or ``continue`` in a loop becomes a flag assigned where it was, the statements
after it guarded by the flag (and a ``break`` flag stops the loop); ``and``, ``or``,
``not`` and ``assert`` become operator calls, other calls `converted_call`, so the user
functions they reach are converted too; ``print`` stays Python's, run as the function is
traced (as in TensorFlow: `sf.print` prints when the graph runs). Statements the rewrite
cannot express as nested functions (holding ``return``, ``yield``, ``global``,
``nonlocal``, ``del``, or loops with ``else``) are left as they were: Python semantics, and
a traced condition there raises the usual staging error at its line; so are nested
functions decorated with ``do_not_convert``. Every node the
rewrite makes carries the line of the statement it replaces, so tracebacks and IR
locations point at user lines.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator

AG = "ag__"


def _name(id_: str, ctx: ast.expr_context | None = None) -> ast.Name:
    return ast.Name(id=id_, ctx=ctx or ast.Load())


def _call(function: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Attribute(value=_name(AG), attr=function, ctx=ast.Load()),
                    args=list(args), keywords=[])


def _arguments(names: list[str] | None = None) -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[ast.arg(arg=a) for a in names or []],
                         kwonlyargs=[], kw_defaults=[], defaults=[])


def _function(name: str, body: list[ast.stmt], args: list[str] | None = None) -> ast.FunctionDef:
    return ast.FunctionDef(name=name, args=_arguments(args), body=body or [ast.Pass()],
                           decorator_list=[], returns=None)


def _thunk(body: ast.expr) -> ast.Lambda:
    """``lambda: body``."""
    return ast.Lambda(args=_arguments(), body=body)


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` of an attribute chain over a name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _symbol(dotted: str, ctx: ast.expr_context | None = None) -> ast.expr:
    """The name or attribute chain `dotted` names."""
    parts = dotted.split(".")
    node: ast.expr = _name(parts[0])
    for attr in parts[1:-1]:
        node = ast.Attribute(value=node, attr=attr, ctx=ast.Load())
    if len(parts) == 1:
        return _name(parts[0], ctx)
    return ast.Attribute(value=node, attr=parts[-1], ctx=ctx or ast.Load())


def _names_do_not_convert(decorator: ast.expr) -> bool:
    """Whether a decorator is `do_not_convert` (``@do_not_convert``,
    ``@sf.autograph.experimental.do_not_convert``, or called with arguments)."""
    if isinstance(decorator, ast.Call):
        decorator = decorator.func
    name = decorator.attr if isinstance(decorator, ast.Attribute) else getattr(
        decorator, "id", None)
    return name == "do_not_convert"


def _plain(names: list[str]) -> list[str]:
    """The names (not attributes) of a state: what nested functions declare nonlocal."""
    return [n for n in names if "." not in n]


def _targets(node: ast.AST) -> Iterator[str]:
    """The names (and attributes of names: ``self.total``) an assignment target binds."""
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute) and _dotted(node) is not None:
        yield _dotted(node)  # type: ignore[misc]
    elif isinstance(node, ast.Tuple | ast.List):
        for element in node.elts:
            yield from _targets(element)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)


def bound_names(statements: list[ast.stmt]) -> set[str]:
    """The names `statements` bind in their function's scope (not inside nested functions,
    classes, lambdas or comprehensions)."""
    names: set[str] = set()
    pending: list[ast.AST] = list(statements)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if not node.name.startswith(AG):  # the rewrite's own helpers are no state
                names.add(node.name)
            continue
        if isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp
                      | ast.GeneratorExp):
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(_targets(target))
        elif isinstance(node, ast.AugAssign | ast.AnnAssign | ast.For | ast.AsyncFor):
            names.update(_targets(node.target))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            names.update(_targets(node.optional_vars))
        elif isinstance(node, ast.NamedExpr):
            names.update(_targets(node.target))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        pending.extend(ast.iter_child_nodes(node))
    return names


def _escapes(statements: list[ast.stmt], loops_too: bool) -> bool:
    """Whether `statements` hold what a nested function cannot express: ``return``,
    ``yield``, ``global``, ``nonlocal``, ``del``, and (with `loops_too`) a ``break`` or
    ``continue`` of an enclosing loop."""
    pending: list[tuple[ast.AST, bool]] = [(s, False) for s in statements]
    while pending:
        node, in_loop = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                      | ast.Lambda):
            continue
        if isinstance(node, ast.Return | ast.Yield | ast.YieldFrom | ast.Global
                      | ast.Nonlocal | ast.Delete | ast.Await):
            return True
        if loops_too and not in_loop and isinstance(node, ast.Break | ast.Continue):
            return True
        inner = in_loop or isinstance(node, ast.For | ast.While | ast.AsyncFor)
        pending.extend((child, inner) for child in ast.iter_child_nodes(node))
    return False


class Converter(ast.NodeTransformer):
    """Rewrites one function definition (and the functions nested in it)."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._declared: list[set[str]] = []  # per function: names declared global/nonlocal
        # per if of the source: the names read anywhere in its function outside it
        self._live: dict[int, set[str]] = {}

    # -- functions --------------------------------------------------------------------------

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        if self._declared and any(_names_do_not_convert(d) for d in node.decorator_list):
            return node  # a nested function the user asked to leave as it is
        declared = {n for s in ast.walk(node) if isinstance(s, ast.Global | ast.Nonlocal)
                    for n in s.names}
        self._declared.append(declared)
        node.decorator_list = []
        body = _returns_as_value(node.body)
        self._live.update(_loads_outside(body))
        node.body = self._statements(body)
        self._declared.pop()
        return node

    def _statements(self, statements: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for statement in statements:
            result = self.visit(statement)
            out.extend(result if isinstance(result, list) else [result])
        return out

    def _convertible(self, names: set[str], statements: list[ast.stmt],
                     loops_too: bool) -> bool:
        declared = self._declared[-1] if self._declared else set()
        return bool(self._declared) and not (names & declared) and not _escapes(
            statements, loops_too)

    # -- state ------------------------------------------------------------------------------

    def _state(self, names: list[str], tag: str) -> tuple[list[ast.stmt], str, str]:
        """The get_state/set_state functions of a statement over `names`."""
        get_name, set_name = f"{AG}get_state_{tag}", f"{AG}set_state_{tag}"
        reads = [_call("ld", _thunk(_symbol(n)),
                       ast.Constant(n)) for n in names]
        getter = _function(get_name, [ast.Return(ast.Tuple(elts=reads, ctx=ast.Load()))])
        setter = _function(set_name, self._bind_all(names, _name(f"{AG}values"), True),
                           [f"{AG}values"])
        return [getter, setter], get_name, set_name

    def _bind_all(self, names: list[str], values: ast.expr, nested: bool) -> list[ast.stmt]:
        """Statements binding each of `names` to its item of the tuple `values`: names
        directly (declared nonlocal when `nested`), attributes through `ag__.store`, which
        leaves an attribute a path did not set unset."""
        body: list[ast.stmt] = []
        plain = _plain(names)
        if nested and plain:
            body.append(ast.Nonlocal(names=plain))
        for position, name in enumerate(names):
            item = ast.Subscript(value=values, slice=ast.Constant(position), ctx=ast.Load())
            if "." in name:
                base, attr = name.rsplit(".", 1)
                body.append(ast.Expr(_call("store", _symbol(base), ast.Constant(attr), item)))
            else:
                body.append(ast.Assign(targets=[_name(name, ast.Store())], value=item))
        return body

    def _part(self, name: str, body: list[ast.stmt], names: list[str],
              args: list[str] | None = None) -> ast.FunctionDef:
        """A nested function running `body` on the enclosing function's `names`."""
        plain = _plain(names)
        prefix: list[ast.stmt] = [ast.Nonlocal(names=plain)] if plain else []
        return _function(name, prefix + body, args)

    def _assign_state(self, names: list[str], value: ast.expr) -> list[ast.stmt]:
        if not names:
            return [ast.Expr(value)]
        if not any("." in n for n in names):
            return [ast.Assign(targets=[ast.Tuple(elts=[_name(n, ast.Store()) for n in names],
                                                  ctx=ast.Store())], value=value)]
        results = f"{AG}results_{next(self._ids)}"
        return [ast.Assign(targets=[_name(results, ast.Store())], value=value),
                *self._bind_all(names, _name(results), False)]

    # -- if -------------------------------------------------------------------------------

    def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt]:
        node.test = self.visit(node.test)
        node.body = self._statements(node.body)
        node.orelse = self._statements(node.orelse)
        names = sorted(bound_names(node.body) | bound_names(node.orelse))
        if not self._convertible(set(names), node.body + node.orelse, loops_too=True):
            return node
        tag = str(next(self._ids))
        state, get_name, set_name = self._state(names, tag)
        body = self._part(f"{AG}if_body_{tag}", node.body, names)
        orelse = self._part(f"{AG}else_body_{tag}", node.orelse, names)
        live = self._live.get(id(node))
        call = _call("if_stmt", node.test, _name(body.name), _name(orelse.name),
                     _name(get_name), _name(set_name),
                     ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()),
                     ast.Tuple(elts=[ast.Constant(live is None or n in live
                                                  or n.startswith(AG))  # the rewrite's flags
                                     for n in names], ctx=ast.Load()))
        return self._located(node, [body, orelse, *state, *self._assign_state(names, call)])

    # -- loops ----------------------------------------------------------------------------

    def visit_While(self, node: ast.While) -> ast.AST | list[ast.stmt]:
        if node.orelse:
            return self.generic_visit(node)
        tag = str(next(self._ids))
        prelude, body, stop = self._lower_jumps(node.body, tag)
        test = node.test if stop is None else ast.BoolOp(
            op=ast.And(), values=[ast.UnaryOp(op=ast.Not(), operand=_name(stop)), node.test])
        test = self.visit(ast.copy_location(test, node.test))
        body = self._statements(body)
        names = sorted(bound_names(body))
        if not self._convertible(set(names), body, loops_too=True):
            node.test, node.body = test, body
            return [*prelude, node] if prelude else node
        state, get_name, set_name = self._state(names, tag)
        test_function = _function(f"{AG}loop_test_{tag}", [ast.Return(test)])
        body_function = self._part(f"{AG}loop_body_{tag}", body, names)
        call = _call("while_stmt", _name(test_function.name), _name(body_function.name),
                     _name(get_name), _name(set_name),
                     ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()))
        return self._located(node, [*prelude, test_function, body_function, *state,
                                    *self._assign_state(names, call)])

    def visit_For(self, node: ast.For) -> ast.AST | list[ast.stmt]:
        if node.orelse:
            return self.generic_visit(node)
        tag = str(next(self._ids))
        prelude, body, stop = self._lower_jumps(node.body, tag)
        iterable = self.visit(node.iter)
        item = f"{AG}item_{tag}"
        body = [ast.Assign(targets=[node.target], value=_name(item)), *body]
        body = self._statements(body)
        names = sorted(bound_names(body))
        if not self._convertible(set(names), body, loops_too=True):
            node.iter, node.body = iterable, body[1:]
            return [*prelude, node] if prelude else node
        state, get_name, set_name = self._state(names, tag)
        body_function = self._part(f"{AG}loop_body_{tag}", body, names, [item])
        extra: ast.expr = ast.Constant(None)
        if stop is not None:
            extra = _thunk(_call("not_", _name(stop)))
        call = _call("for_stmt", iterable, _name(body_function.name), extra,
                     _name(get_name), _name(set_name),
                     ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()))
        return self._located(node, [*prelude, body_function, *state,
                                    *self._assign_state(names, call)])

    def _lower_jumps(self, body: list[ast.stmt], tag: str
                     ) -> tuple[list[ast.stmt], list[ast.stmt], str | None]:
        """A loop body's ``break`` and ``continue`` as flags: the statements to put before
        the loop, the new body, and the flag that stops the loop (None without a break)."""
        has_break = _jumps(body, ast.Break)
        has_continue = _jumps(body, ast.Continue)
        if not (has_break or has_continue):
            return [], body, None
        stop = f"{AG}break_{tag}" if has_break else None
        skip = f"{AG}continue_{tag}" if has_continue else None
        flags = [f for f in (stop, skip) if f is not None]
        body = _guarded(_replace_jumps(body, stop, skip), flags)
        if skip is not None:
            body = [ast.Assign(targets=[_name(skip, ast.Store())], value=ast.Constant(False)),
                    *body]
        prelude: list[ast.stmt] = []
        for flag in flags:
            prelude.append(ast.Assign(targets=[_name(flag, ast.Store())],
                                      value=ast.Constant(False)))
        return prelude, body, stop

    # -- expressions ------------------------------------------------------------------------

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        values = [self.visit(v) for v in node.values]
        function = "and_" if isinstance(node.op, ast.And) else "or_"
        result = values[-1]
        for value in reversed(values[:-1]):
            result = _call(function, _thunk(value), _thunk(result))
        _point_at(result, node)
        return result

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        node.operand = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            call = _call("not_", node.operand)
            _point_at(call, node)
            return call
        return node

    def visit_Call(self, node: ast.Call) -> ast.expr:
        node = self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "print":
            return node  # Python's: it prints as it traces (TensorFlow's too; sf.print runs)
        if isinstance(node.func, ast.Name | ast.Attribute):
            call = ast.Call(
                func=ast.Attribute(value=_name(AG), attr="converted_call", ctx=ast.Load()),
                args=[node.func, *node.args], keywords=node.keywords)
        else:
            return node
        _point_at(call, node)
        return call

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        test = self.visit(node.test)
        message = (_thunk(self.visit(node.msg)) if node.msg is not None
                   else ast.Constant(None))
        statement = ast.Expr(_call("assert_", test, message))
        _point_at(statement, node)
        return statement

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        node.body = self.visit(node.body)
        return node

    # -- locations ------------------------------------------------------------------------

    def _located(self, original: ast.stmt, statements: list[ast.stmt]) -> list[ast.stmt]:
        """Give every new node the line of the statement it replaces (the user's code kept
        inside keeps its own lines)."""
        for statement in statements:
            _point_at(statement, original)
        return statements


RETURN = f"{AG}retval"  # what a return inside a branch or loop assigns
DID_RETURN = f"{AG}did_return"


def _always_returns(statements: list[ast.stmt]) -> bool:
    """Whether a block ends in a ``return`` on every path through its ifs."""
    if not statements:
        return False
    last = statements[-1]
    if isinstance(last, ast.Return):
        return True
    return (isinstance(last, ast.If) and _always_returns(last.body)
            and _always_returns(last.orelse))


def _tails(statements: list[ast.stmt]) -> list[ast.stmt]:
    """The block with what follows an ``if`` one branch of which always returns moved into
    its other branch, recursively: ``if c: return a`` then ``return b`` becomes
    ``if c: return a else: return b``, every return at the end of a path."""
    out: list[ast.stmt] = []
    for position, statement in enumerate(statements):
        if isinstance(statement, ast.If):
            rest = statements[position + 1:]
            if rest and _always_returns(statement.body) and not _always_returns(
                    statement.orelse):
                statement.orelse = statement.orelse + rest
                rest = []
            elif rest and _always_returns(statement.orelse) and not _always_returns(
                    statement.body):
                statement.body = statement.body + rest
                rest = []
            statement.body = _tails(statement.body)
            statement.orelse = _tails(statement.orelse)
            out.append(statement)
            if not rest:
                return out
            continue
        out.append(statement)
    return out


def _assign_returns(statements: list[ast.stmt]) -> list[ast.stmt]:
    """A block that always returns, its returns turned into assignments of `RETURN`."""
    last = statements[-1]
    if isinstance(last, ast.Return):
        value = last.value if last.value is not None else ast.Constant(None)
        assign = ast.Assign(targets=[_name(RETURN, ast.Store())], value=value)
        return [*statements[:-1], ast.copy_location(assign, last)]
    assert isinstance(last, ast.If)
    last.body = _assign_returns(last.body)
    last.orelse = _assign_returns(last.orelse)
    return statements


def _returns_as_value(body: list[ast.stmt]) -> list[ast.stmt]:
    """A function body whose returns all end the paths through its trailing ifs, as those
    ifs assigning one value and a single ``return`` of it after them (so the ifs can become
    conds); a return inside a loop first becomes that value, a flag and a ``break`` (and
    after the loop, a return of the value if the flag is set); any other body as it was."""
    has_nested = any(isinstance(node, ast.Return) for statement in body
                     if not isinstance(statement, ast.Return)
                     for node in _walk_scope(statement))
    if not has_nested:
        return body
    body = _loop_returns(body, in_loop=False)
    if any(isinstance(n, ast.Name) and n.id == DID_RETURN for s in body for n in ast.walk(s)):
        flag = ast.Assign(targets=[_name(DID_RETURN, ast.Store())], value=ast.Constant(False))
        _point_at(flag, body[0])
        body = [flag, *body]
    body = _tails(body)
    last = body[-1] if body else None
    if not isinstance(last, ast.If) or not _always_returns([last]):
        return body
    body[-1:] = _assign_returns([last])
    final = ast.Return(_name(RETURN))
    _point_at(final, last)
    return [*body, final]


def _loop_returns(statements: list[ast.stmt], in_loop: bool) -> list[ast.stmt]:
    """`statements` with each ``return`` inside a loop turned into an assignment of the
    value, of the `DID_RETURN` flag and a ``break``; after a loop holding one, a ``break``
    (in a loop) or a ``return`` of the value (outside), if the flag is set."""
    out: list[ast.stmt] = []
    for statement in statements:
        if isinstance(statement, ast.Return) and in_loop:
            value = statement.value if statement.value is not None else ast.Constant(None)
            lowered = [ast.Assign(targets=[_name(RETURN, ast.Store())], value=value),
                       ast.Assign(targets=[_name(DID_RETURN, ast.Store())],
                                  value=ast.Constant(True)), ast.Break()]
            for node in lowered:
                _point_at(node, statement)
            out.extend(lowered)
            continue
        if isinstance(statement, ast.If):
            statement.body = _loop_returns(statement.body, in_loop)
            statement.orelse = _loop_returns(statement.orelse, in_loop)
        elif isinstance(statement, ast.For | ast.While) and any(
                isinstance(node, ast.Return) for node in _walk_scope(statement)):
            statement.body = _loop_returns(statement.body, in_loop=True)
            out.append(statement)
            after = ast.If(test=_name(DID_RETURN),
                           body=[ast.Break() if in_loop else ast.Return(_name(RETURN))],
                           orelse=[])
            _point_at(after, statement)
            out.append(after)
            continue
        out.append(statement)
    return out


def _walk_scope(node: ast.AST) -> list[ast.AST]:
    """The nodes of `node` in its function's scope (not in nested functions or classes)."""
    found: list[ast.AST] = []
    pending = [node]
    while pending:
        current = pending.pop()
        found.append(current)
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                              | ast.Lambda):
                pending.append(child)
    return found


def _loads_outside(body: list[ast.stmt]) -> dict[int, set[str]]:
    """For each ``if`` of a function body: the names read in the function outside it (what
    may be live after it; a name only its branches read is dead there)."""
    loads = [n for statement in body for n in _walk_scope(statement)
             if isinstance(n, ast.Name | ast.Attribute) and isinstance(n.ctx, ast.Load)
             and _dotted(n) is not None]
    result: dict[int, set[str]] = {}
    for statement in body:
        for node in _walk_scope(statement):
            if isinstance(node, ast.If):
                inside = {id(n) for n in _walk_scope(node)}
                result[id(node)] = {_dotted(n) for n in loads if id(n) not in inside}
    return result


def _point_at(tree: ast.AST, original: ast.AST) -> None:
    """Locate the nodes of `tree` that have no location at the start of `original`, on one
    line (an attribute spanning lines would be placed at its last one)."""
    if getattr(original, "lineno", None) is None:
        return  # `original` is new too: located with what holds it
    for node in ast.walk(tree):
        if "lineno" in node._attributes and getattr(node, "lineno", None) is None:
            node.lineno = node.end_lineno = original.lineno
            node.col_offset = node.end_col_offset = original.col_offset


def _jumps(body: list[ast.stmt], kind: type) -> bool:
    """Whether `body` holds a `kind` (break or continue) of the loop it is the body of."""
    pending = list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, kind):
            return True
        if isinstance(node, ast.For | ast.While | ast.AsyncFor | ast.FunctionDef
                      | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        pending.extend(ast.iter_child_nodes(node))
    return False


def _replace_jumps(body: list[ast.stmt], stop: str | None, skip: str | None) -> list[ast.stmt]:
    """`body` with its loop's ``break``/``continue`` turned into assignments of the flags."""

    class Replace(ast.NodeTransformer):
        def visit_Break(self, node: ast.Break) -> ast.stmt:
            return ast.copy_location(ast.Assign(targets=[_name(stop or "", ast.Store())],
                                                value=ast.Constant(True)), node)

        def visit_Continue(self, node: ast.Continue) -> ast.stmt:
            return ast.copy_location(ast.Assign(targets=[_name(skip or "", ast.Store())],
                                                value=ast.Constant(True)), node)

        def visit_For(self, node: ast.For) -> ast.For:
            return node  # its own jumps

        visit_While = visit_For  # noqa: N815 - the visitor's naming

        def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
            return node

    return [Replace().visit(statement) for statement in body]


def _sets_flag(statement: ast.stmt, flags: list[str]) -> bool:
    return any(isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
               and node.id in flags for node in ast.walk(statement))


def _guarded(body: list[ast.stmt], flags: list[str]) -> list[ast.stmt]:
    """`body` where what follows a statement that may set a flag runs only while none is
    set (recursively into the branches that set them)."""
    out: list[ast.stmt] = []
    for position, statement in enumerate(body):
        if isinstance(statement, ast.If) and _sets_flag(statement, flags):
            statement.body = _guarded(statement.body, flags)
            statement.orelse = _guarded(statement.orelse, flags)
        out.append(statement)
        rest = body[position + 1:]
        if rest and _sets_flag(statement, flags):
            test = ast.UnaryOp(op=ast.Not(), operand=ast.BoolOp(
                op=ast.Or(), values=[_name(f) for f in flags]) if len(flags) > 1
                else _name(flags[0]))
            guard = ast.If(test=test, body=_guarded(rest, flags), orelse=[])
            _point_at(guard, rest[0])
            out.append(guard)
            return out
    return out
