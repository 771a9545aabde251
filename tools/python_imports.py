"""Finds which of the workspace's own Python files a source file imports."""

import ast
import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Import:
    """An import of a workspace file.

    Attributes:
        line: the line of the import statement.
        module: the imported module, as written (dotted, made absolute).
        path: the imported file, relative to the workspace root.
    """

    line: int
    module: str
    path: str


def _module_file(root: Path, module: str) -> str | None:
    """Returns the file of a dotted module name, or None if not in `root`."""
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.relative_to(root).as_posix()
    return None


def workspace_imports(
    root: Path, source: str, top_level_names: frozenset[str]
) -> list[Import]:
    """Lists the workspace files that `source` imports, in file order.

    `from a.b import c` imports a/b/c.py when that file exists, else a/b.py
    (or a/b/__init__.py); relative imports are resolved from `source`.
    Imports anywhere in the file count (also inside functions), since each
    needs its file at run time.

    Args:
        root: the workspace root.
        source: the source file, relative to `root`.
        top_level_names: the workspace's top-level modules and packages
            ("keras_transformer", "tests", ...); other imports are skipped.

    Returns:
        One `Import` per imported workspace file and statement.

    Raises:
        SyntaxError: if `source` is not valid Python.
    """
    tree = ast.parse((root / source).read_text(encoding="utf-8"), source)
    # The package of a/b/c.py and of a/b/__init__.py is a.b.
    package = source.split("/")[:-1]
    found: list[Import] = []

    def add(line: int, module: str, alternative: str | None = None):
        if module.split(".")[0] not in top_level_names:
            return
        path = None
        if alternative is not None:
            path = _module_file(root, alternative)
            module = alternative if path else module
        path = path or _module_file(root, module)
        if path is not None and path != source:
            found.append(Import(line, module, path))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module
            for alias in node.names:
                add(node.lineno, prefix, f"{prefix}.{alias.name}")
    return sorted(found, key=lambda item: item.line)
