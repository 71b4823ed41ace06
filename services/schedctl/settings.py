"""``schedctl config``: the named contexts of ``schedctl.contexts`` (list, switch, set, delete)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from schedctl import contexts, output
from schedctl.cli import EXIT_NOT_FOUND, EXIT_REJECTED, OutputOption, app, fail, use_format

config_app = typer.Typer(help="Named contexts: where schedctl connects and with what.", no_args_is_help=True)
app.add_typer(config_app, name="config")


def _load() -> contexts.Config:
    try:
        return contexts.load()
    except contexts.ConfigError as exc:
        fail(EXIT_REJECTED, str(exc))


@config_app.command("get-contexts")
def get_contexts(output_format: OutputOption = None) -> None:
    """List the contexts; the current one is marked with *."""
    use_format(output_format)
    config = _load()
    if not config.contexts:
        output.console.print(f"no contexts in {config.path}", highlight=False)
        return
    table = Table("CURRENT", "NAME", "API", "TOKEN", "TLS")
    for name, settings in sorted(config.contexts.items()):
        token = "file" if settings.get("token-file") else ("inline" if settings.get("token") else "-")
        tls = "mutual" if settings.get("tls-cert") else ("yes" if settings.get("tls-ca") else "no")
        table.add_row("*" if name == config.current else "", name, settings.get("api", "-"), token, tls)
    output.console.print(table)


@config_app.command("current-context")
def current_context(output_format: OutputOption = None) -> None:
    """Print the current context's name."""
    use_format(output_format)
    config = _load()
    if not config.current:
        fail(EXIT_NOT_FOUND, f"no current context in {config.path}")
    print(config.current)


@config_app.command("use-context")
def use_context(
    name: Annotated[str, typer.Argument(help="the context to use from now on")],
    output_format: OutputOption = None,
) -> None:
    """Make a context the current one."""
    use_format(output_format)
    config = _load()
    if name not in config.contexts:
        fail(EXIT_NOT_FOUND, f"no context {name!r} in {config.path}")
    config.current = name
    config.save()
    output.err_console.print(f"switched to context {name}", highlight=False)


@config_app.command("set-context")
def set_context(
    name: Annotated[str, typer.Argument(help="the context to create or change")],
    api: Annotated[str | None, typer.Option(help="host:port of the api")] = None,
    token_file: Annotated[str | None, typer.Option(help="a file holding the token")] = None,
    tls_ca: Annotated[str | None, typer.Option(help="CA of the api's certificate")] = None,
    tls_cert: Annotated[str | None, typer.Option(help="client certificate (mutual TLS)")] = None,
    tls_key: Annotated[str | None, typer.Option(help="its key")] = None,
    output_format: OutputOption = None,
) -> None:
    """Create or change a context (settings not given are kept); the first one becomes current."""
    use_format(output_format)
    config = _load()
    settings = dict(config.contexts.get(name, {}))
    given = {"api": api, "token-file": token_file, "tls-ca": tls_ca, "tls-cert": tls_cert, "tls-key": tls_key}
    for key, value in given.items():
        if value is not None:
            if value:
                settings[key] = value
            else:
                settings.pop(key, None)
    config.contexts[name] = settings
    if not config.current:
        config.current = name
    config.save()
    output.err_console.print(f"context {name} saved in {config.path}", highlight=False)


@config_app.command("delete-context")
def delete_context(
    name: Annotated[str, typer.Argument(help="the context to delete")], output_format: OutputOption = None
) -> None:
    """Delete a context (the current context is then unset when it was this one)."""
    use_format(output_format)
    config = _load()
    if config.contexts.pop(name, None) is None:
        fail(EXIT_NOT_FOUND, f"no context {name!r} in {config.path}")
    if config.current == name:
        config.current = ""
    config.save()
    output.err_console.print(f"context {name} deleted", highlight=False)
