"""`adaptrack-lsp serve`: run the language server on stdio or TCP (127.0.0.1)."""

HELP = "run the language server (stdio by default; --tcp binds 127.0.0.1)"


def add_arguments(parser) -> None:
    parser.add_argument("--tcp", action="store_true", help="listen on TCP 127.0.0.1 instead of stdio")
    parser.add_argument("--port", type=int, default=2087, help="TCP port (default 2087)")
    parser.add_argument(
        "--model",
        default=None,
        help="model to load unless the editor's settings name one ('tiny' = built-in offline model, "
        "a local folder or a Hugging Face hub id)",
    )
    parser.add_argument(
        "--max-message-mb",
        type=float,
        default=64,
        help="largest JSON-RPC message accepted, in MiB (default 64); larger ones are answered with an error and skipped",
    )


def run(args) -> int:
    from adaptrack_lsp.lsp_server.server import serve

    if args.tcp and not 0 < args.port < 65536:
        raise SystemExit(f"--port must be between 1 and 65535, got {args.port}")
    if not args.max_message_mb > 0:
        raise SystemExit(f"--max-message-mb must be positive, got {args.max_message_mb}")
    settings = {"model": args.model} if args.model else None
    return serve(
        tcp=args.tcp, host="127.0.0.1", port=args.port, settings=settings, max_message_bytes=int(args.max_message_mb * 2**20)
    )
