"""`adaptrack-lsp serve`: run the language server on stdio or TCP (127.0.0.1)."""

import os
import sys

from adaptrack_lsp.config import model_argument

HELP = "run the language server (stdio by default; --tcp binds 127.0.0.1)"


def add_arguments(parser) -> None:
    parser.add_argument("--tcp", action="store_true", help="listen on TCP 127.0.0.1 instead of stdio")
    parser.add_argument("--port", type=int, default=2087, help="TCP port (default 2087)")
    parser.add_argument(
        "--token-file",
        default=None,
        help="with --tcp: where to write the generated connection token (mode 0600; default "
        "$XDG_RUNTIME_DIR/adaptrack-lsp-PORT.token or the user cache dir); $ADAPTRACK_LSP_TOKEN "
        "gives the token instead",
    )
    parser.add_argument(
        "--model",
        default=None,
        type=model_argument,
        help="model to load unless the editor's settings name one ('builtin' = the offline model, the "
        "default; a local folder or a Hugging Face hub id)",
    )
    add_backend_arguments(parser)
    from adaptrack_lsp.commands.target_options import add_target_arguments

    add_target_arguments(parser, strict=False)  # the server names a target it cannot build in its status
    parser.add_argument(
        "--max-message-mb",
        type=float,
        default=64,
        help="largest JSON-RPC message accepted, in MiB (default 64); larger ones are answered with an error and skipped",
    )


def add_backend_arguments(parser) -> None:
    """`--backend`, `--endpoint`, `--tokenizer`: the engine settings of the same names
    (`serve` uses them unless the editor's settings name others)."""
    from adaptrack_lsp.config import BACKENDS

    parser.add_argument("--backend", choices=BACKENDS, default=None, help="where the model runs (default auto: llamacpp for a .gguf, else transformers)")
    parser.add_argument("--endpoint", default=None, metavar="URL", help="the inference server's URL for --backend server (e.g. http://127.0.0.1:8080)")
    parser.add_argument(
        "--tokenizer", default=None, metavar="PATH_OR_ID", help="the served model's tokenizer files, a folder or hub id (--backend server; default: --model)"
    )


def backend_settings(args) -> dict:
    """The engine settings given on the command line, camelCase."""
    raw = {"backend": args.backend, "endpoint": args.endpoint, "tokenizer": args.tokenizer}
    return {key: value for key, value in raw.items() if value is not None}


def quiet_progress_bars_off_terminal(stderr=None) -> None:
    """Progress bars (transformers' "Loading weights") only on a terminal: an editor reads
    the server's stderr as log lines, where a bar is noise (and one more "error" line).
    Set before transformers is imported; an explicit HF_HUB_DISABLE_PROGRESS_BARS wins."""
    stderr = stderr if stderr is not None else sys.stderr
    if not stderr.isatty():
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def run(args) -> int:
    quiet_progress_bars_off_terminal()
    from adaptrack_lsp.lsp_server.server import serve

    if args.tcp and not 0 < args.port < 65536:
        raise SystemExit(f"--port must be between 1 and 65535, got {args.port}")
    if not args.max_message_mb > 0:
        raise SystemExit(f"--max-message-mb must be positive, got {args.max_message_mb}")
    from adaptrack_lsp.commands.target_options import target_settings

    try:
        targets = target_settings(args, "serve")
    except ValueError as error:
        raise SystemExit(f"adaptrack-lsp serve: {error}") from None
    settings = ({"model": args.model} if args.model else {}) | backend_settings(args) | targets
    return serve(
        tcp=args.tcp,
        host="127.0.0.1",
        port=args.port,
        settings=settings or None,
        token_file=args.token_file,
        max_message_bytes=int(args.max_message_mb * 2**20),
    )
