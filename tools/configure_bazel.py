"""Writes .configure.bazelrc: this machine's paths for `--config=offline`.

Run `python3 tools/configure_bazel.py` with the project's Python, once.
"""

import argparse
import shutil
import sys
from pathlib import Path

# Bazel 4.2.3 wants absolute paths in --override_repository and
# --python_path and does not expand %workspace% in flag values, so they are
# written here, under the config that .bazelrc's --config=offline expands to
# (as TensorFlow's `configure` writes .tf_configure.bazelrc).
CONFIG_NAME = "configured_by_tools_configure_bazel"
RC_FILE_NAME = ".configure.bazelrc"
# Repositories `bazel test` would download, and their stand-ins here.
LOCAL_REPOSITORIES = {
    "rules_cc": "third_party/bazel/rules_cc",
    "remote_coverage_tools": "third_party/bazel/remote_coverage_tools",
}


def render_rc(workspace: Path, python: Path) -> str:
    """Returns the text of .configure.bazelrc.

    Args:
        workspace: the absolute path of the Bazel workspace.
        python: the absolute path of the Python interpreter that runs the
            Python targets; it must have the project's requirements.

    Returns:
        The rc file text, one line per flag: `common:<config>` for the
        repository overrides (query and fetch load repositories too),
        `build:<config>` for the interpreter.

    Raises:
        ValueError: if a path is relative or a stand-in repository is missing.
    """
    for name, path in (("workspace", workspace), ("python", python)):
        if not path.is_absolute():
            raise ValueError(
                f"`{name}` must be an absolute path, because Bazel resolves "
                f"it outside the workspace. Received: {name}={path}"
            )
    lines = [
        f"# Written by tools/configure_bazel.py for {workspace}; do not commit",
        "# (rerun the script after moving the checkout or the environment).",
    ]
    for repository, relative_dir in LOCAL_REPOSITORIES.items():
        directory = workspace / relative_dir
        if not (directory / "WORKSPACE").is_file():
            raise ValueError(
                f"The local stand-in of @{repository} is missing: expected "
                f"{directory}/WORKSPACE; restore {relative_dir} from git. "
                f"Received: workspace={workspace}"
            )
        lines.append(
            f"common:{CONFIG_NAME} "
            f"--override_repository={repository}={directory}"
        )
    lines.append(f"build:{CONFIG_NAME} --python_path={python}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Writes .configure.bazelrc at the workspace root and returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter of the Python targets (default: this one)",
    )
    args = parser.parse_args(argv)
    workspace = Path(__file__).resolve().parents[1]
    # A bare name ("python3") is looked up on PATH, like a shell would.
    python = Path(shutil.which(args.python) or args.python).absolute()
    rc_path = workspace / RC_FILE_NAME
    rc_path.write_text(render_rc(workspace, python), encoding="utf-8")
    print(f"Wrote {rc_path} (Python: {python})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
