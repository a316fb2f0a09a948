"""`adaptrack-lsp sample`: draw many constrained samples with any decoder.

Two sources:

- ``--task TASK.json``: an exact tabular LM plus a finite set of valid sequences (format
  in `adaptrack_lsp.evaluation.tasks`); the table compares the frequencies with the exact
  P(s | c) and with what greedy constrained decoding would give.  With ``--grammar
  G.lark`` (or a .regex, or a .json schema) the grammar is the whole constraint (the
  task's `valid` list may be absent) and the exact P(s | c) comes from enumeration under
  the grammar up to ``--max-new-tokens`` tokens (default 16).
- ``--model M --prompt-file P`` with a constraint (``--allowed FILE``: a sample is exactly
  one of the file's lines, ended by the model's end-of-sequence token, so P(s) includes
  P(eos | s); or ``--grammar G``), on any backend (``--backend
  transformers|llamacpp|server``, ``--endpoint URL``, ``--tokenizer PATH_OR_ID``).  All
  samples are drawn in one request (one prefix tree: the exact samplers stay exact, and
  later samples reuse what earlier ones learned), which is how CARS-style workloads draw
  thousands of samples.

With `--json` the command prints one object, ``{"counts": {sample: n, ...},
"lm_calls": ..., "server_calls": ..., "counters": {...}, "failures": n, ...}`` (task
samples as tokens joined by single spaces, model samples as their text); otherwise a
table.
"""

from __future__ import annotations

import argparse
import json
import sys

HELP = "draw constrained samples with a decoder: a task file (exact tabular LM) or a real model and prompt"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from adaptrack_lsp.config import model_argument

    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--task", metavar="TASK.json", help="task file (vocab, eos, default, next, valid)")
    source.add_argument("--model", type=model_argument, help="a model: 'tiny', a local folder, a GGUF file or a hub id (with --prompt-file)")
    parser.add_argument("--prompt-file", metavar="P", help="with --model: the text the samples continue")
    parser.add_argument("--allowed", metavar="FILE", help="with --model: each sample is exactly one line of FILE, then end of sequence")
    from adaptrack_lsp.commands.serve import add_backend_arguments

    add_backend_arguments(parser)
    from adaptrack_lsp.config import DECODER_NAMES

    parser.add_argument(
        "--decoder", default="adaptrack", help=f"decoder name: {', '.join(DECODER_NAMES)} (default: adaptrack)"
    )
    parser.add_argument("--n", type=int, default=1000, help="number of samples (default: 1000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--temperature", type=float, default=1.0, help="temperature; <= 0 means greedy (default: 1)")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="decoder option, repeatable; VALUE is read as JSON when it parses (e.g. max_backtrack_distance=2, share_estimates=false)",
    )
    parser.add_argument(
        "--grammar",
        default=None,
        metavar="G.lark",
        help="constrain with this grammar instead of the task's valid list (.lark, .regex, or a .json schema)",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="token limit per sample (default: the longest valid sequence's length; with --grammar: 16, "
        "also the length cap of the enumerated P(s|c))",
    )
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="wall-clock budget for the whole run")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def parse_options(items: list[str]) -> dict:
    """``["key=value", ...]`` -> dict; values parse as JSON when they can, else stay strings."""
    options = {}
    for item in items:
        key, separator, value = item.partition("=")
        key = key.strip()
        if not separator or not key:
            raise ValueError(f"--option {item!r}: expected KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def fail(message: str, code: int = 2) -> int:
    print(f"adaptrack-lsp sample: error: {message}", file=sys.stderr)
    return code


def run(args) -> int:
    from adaptrack_lsp.completion.decoders import OptionError, decoder_names, get_decoder

    if args.n < 1:
        return fail(f"--n must be at least 1, got {args.n}")
    if args.decoder not in decoder_names():
        return fail(f"unknown decoder {args.decoder!r}; choose one of: {', '.join(decoder_names())}")
    try:
        decoder = get_decoder(args.decoder, **parse_options(args.option))
    except (OptionError, ValueError) as error:
        return fail(str(error))
    if args.max_new_tokens is not None and args.max_new_tokens < 1:
        return fail(f"--max-new-tokens must be at least 1, got {args.max_new_tokens}")
    if args.model is not None:
        return run_model(args, decoder)
    for flag in ("prompt_file", "allowed", "backend", "endpoint", "tokenizer"):
        if getattr(args, flag) is not None:
            return fail(f"--{flag.replace('_', '-')} goes with --model, not --task")
    return run_task(args, decoder)


def model_settings(args):
    """`Settings` for the model flags (the same names as the editors' settings)."""
    from adaptrack_lsp.config import parse_settings

    raw = {"model": args.model, "backend": args.backend, "endpoint": args.endpoint, "tokenizer": args.tokenizer}
    return parse_settings({key: value for key, value in raw.items() if value is not None})


def constraint_for(args, lm):
    """The token constraint of the model path (``--allowed`` or ``--grammar``);
    (constraint, default token limit) or raises ValueError naming the flag."""
    from adaptrack_lsp.constrainers.allowed_lines import allowed_lines_constraint, read_allowed_lines

    if args.grammar and args.allowed:
        raise ValueError("give one constraint: --allowed FILE or --grammar G")
    if args.grammar:
        from adaptrack_lsp.constrainers.grammar import GrammarError, GrammarSpec, grammar_constraint

        try:
            return grammar_constraint(lm.vocab, GrammarSpec.from_file(args.grammar)), 16
        except GrammarError as error:
            raise ValueError(str(error)) from None
    if not args.allowed:
        raise ValueError("--model needs a constraint: --allowed FILE (or --grammar G)")
    try:
        lines = read_allowed_lines(args.allowed)
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"--allowed {args.allowed}: {error}") from None
    if not lines:
        raise ValueError(f"--allowed {args.allowed}: the file has no non-empty line")
    # every token adds at least one byte: no tokenization of a line is longer than its bytes
    return allowed_lines_constraint(lm.vocab, lines, source=args.allowed), max(len(line.encode()) for line in lines) + 1


def run_model(args, decoder) -> int:
    """Samples of a real model continuing `--prompt-file`, under `--allowed`."""
    import time

    from adaptrack_lsp.completion.decoders import DecodeRequest
    from adaptrack_lsp.completion.lm.base import ModelError

    if not args.prompt_file:
        return fail("--model needs --prompt-file P (the text the samples continue)")
    try:
        with open(args.prompt_file, encoding="utf-8") as handle:
            prompt = handle.read()
    except (OSError, UnicodeDecodeError) as error:
        return fail(f"--prompt-file {args.prompt_file}: {error}")
    settings, problems = model_settings(args)
    if problems:
        return fail("; ".join(problems))
    from adaptrack_lsp.completion.lm import loading

    started = time.perf_counter()
    try:
        lm = loading.load_for_settings(settings)
    except ModelError as error:
        return fail(str(error), 3)
    problem = getattr(lm, "connect_error", "")
    if problem:
        return fail(problem, 3)
    if getattr(lm, "warning", ""):
        print(f"adaptrack-lsp sample: warning: {lm.warning}", file=sys.stderr)
    load_seconds = time.perf_counter() - started
    try:
        constraint, longest = constraint_for(args, lm)
    except ValueError as error:
        return fail(str(error))
    from adaptrack_lsp.completion.context import PromptBuilder

    builder = PromptBuilder.for_model(lm, max_new_tokens=longest, heal=False)
    plan = builder.build(prompt, len(prompt))
    max_new_tokens = args.max_new_tokens if args.max_new_tokens is not None else longest
    request = DecodeRequest(
        prompt_ids=plan.prompt_ids,
        num_samples=args.n,
        temperature=args.temperature,
        max_new_tokens=max_new_tokens,
        timeout_s=args.timeout,
        seed=args.seed,
    )
    from adaptrack_lsp.constrainers.grammar import GrammarLimitError

    try:
        result = decoder.decode(lm, constraint, request)
    except ModelError as error:
        return fail(str(error), 3)
    except GrammarLimitError as error:
        return fail(str(error))
    counts: dict[str, int] = {}
    for sample in result.samples:
        if sample.complete and sample.valid:
            counts[sample.text] = counts.get(sample.text, 0) + 1
    counts = dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    incomplete = sum(1 for s in result.samples if not s.complete)
    invalid = sum(1 for s in result.samples if not s.valid)
    c = result.counters
    if args.json:
        print(
            json.dumps(
                {
                    "counts": counts,
                    "lm_calls": c.lm_calls,
                    "server_calls": c.server_calls,
                    "counters": c.as_dict(),
                    "failures": result.failures,
                    "status": result.status,
                    "message": result.message,
                    "decoder": args.decoder,
                    "model": settings.model,
                    "backend": loading.backend_for(settings),
                    "n": args.n,
                    "seed": args.seed,
                    "temperature": args.temperature,
                    "invalid": invalid,
                    "incomplete": incomplete,
                    "prompt_tokens": len(plan.prompt_ids),
                    "load_seconds": load_seconds,
                }
            )
        )
        return 0
    total = sum(counts.values())
    width = max([len("sample")] + [len(repr(text)) for text in counts])
    print(f"{settings.model} ({loading.backend_for(settings)}): decoder {args.decoder}, {args.n} samples, seed {args.seed}")
    print(f"{'sample'.ljust(width)}  {'count':>7}  {'share':>8}")
    for text, count in counts.items():
        print(f"{repr(text).ljust(width)}  {count:>7}  {100 * count / total:>7.2f}%")
    print(f"status: {result.status}" + (f" ({result.message})" if result.message else ""))
    print(f"failures: {result.failures}  invalid: {invalid}  incomplete: {incomplete}")
    print(
        f"counters: lm_calls {c.lm_calls}, server_calls {c.server_calls}, tokens_fed {c.tokens_fed}, "
        f"backtracks {c.backtracks}, wall {c.wall_seconds:.3f} s"
    )
    return 0


def run_task(args, decoder) -> int:
    from adaptrack_lsp.completion.decoders import DecodeRequest
    from adaptrack_lsp.constrainers.grammar import GrammarError, GrammarLimitError, GrammarSpec
    from adaptrack_lsp.evaluation.tasks import TaskError, chi_square, load_task

    try:
        grammar = GrammarSpec.from_file(args.grammar) if args.grammar else None
    except GrammarError as error:
        return fail(str(error))
    try:
        task = load_task(args.task, require_valid=grammar is None)
        if grammar is not None:
            from adaptrack_lsp.evaluation.grammar_tasks import DEFAULT_GRAMMAR_CAP, bind_grammar

            task = bind_grammar(task, grammar, args.max_new_tokens or DEFAULT_GRAMMAR_CAP)
    except (TaskError, GrammarError, GrammarLimitError) as error:
        return fail(str(error))
    max_new_tokens = args.max_new_tokens if args.max_new_tokens is not None else max(1, task.max_length)

    request = DecodeRequest(
        prompt_ids=[],
        num_samples=args.n,
        temperature=args.temperature,
        max_new_tokens=max_new_tokens,
        timeout_s=args.timeout,
        seed=args.seed,
    )
    try:
        result = decoder.decode(task.language_model(), task.constraint(), request)
    except GrammarLimitError as error:
        return fail(str(error))

    counts: dict[str, int] = {}
    sequence_of: dict[str, tuple[int, ...]] = {}  # tokens may hold spaces: keys are not parsed back
    for sample in result.samples:
        key = task.format(sample.token_ids)
        counts[key] = counts.get(key, 0) + 1
        sequence_of[key] = tuple(sample.token_ids)
    counts = dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    incomplete = sum(1 for s in result.samples if not s.complete)
    invalid = sum(1 for s in result.samples if not s.valid)
    flagged = {task.format(s.token_ids): ("invalid" if not s.valid else "incomplete") for s in result.samples if not (s.valid and s.complete)}

    if args.json:
        print(
            json.dumps(
                {
                    "counts": counts,
                    "counters": result.counters.as_dict(),
                    "failures": result.failures,
                    "status": result.status,
                    "message": result.message,
                    "decoder": args.decoder,
                    "task": task.name,
                    "n": args.n,
                    "seed": args.seed,
                    "temperature": args.temperature,
                    "invalid": invalid,
                    "incomplete": incomplete,
                    **({"grammar": grammar.source, "length_cap": task.max_length} if grammar is not None else {}),
                }
            )
        )
        return 0

    exact = task.exact_distribution(args.temperature) if args.temperature > 0 else {}
    gcd = task.gcd_distribution(args.temperature) if args.temperature > 0 else None
    gcd_total = sum(gcd.probabilities.values()) if gcd else 0.0
    returned = len(result.samples)
    rows = []
    keys = list(counts) + [task.format(s) for s in sorted(exact, key=lambda s: -exact[s]) if task.format(s) not in counts]
    sequence_of.update({task.format(s): s for s in exact})
    for key in keys:
        sequence = sequence_of[key]
        gcd_share = gcd.probabilities.get(sequence, 0.0) / gcd_total if gcd and gcd_total > 0 and key not in flagged else None
        rows.append(
            (
                key,
                counts.get(key, 0),
                counts.get(key, 0) / returned if returned else 0.0,
                exact.get(sequence) if exact else None,
                gcd_share,
            )
        )
    rows = [((f"{key} ({flagged[key]})" if key in flagged else key), *rest) for key, *rest in rows]
    width = max([len("sequence")] + [len(r[0]) for r in rows])

    def percent(value):
        return "-" if value is None else f"{100 * value:.2f}%"

    print(f"task {task.name}: decoder {args.decoder}, {args.n} samples, seed {args.seed}, temperature {args.temperature:g}")
    if grammar is not None:
        print(
            f"constraint: grammar {grammar.source}; P(s|c) by enumeration up to {task.max_length} tokens "
            f"({len(task.valid)} valid sequences; LM mass of valid prefixes cut by the cap: {task.cut_mass:.3g})"
        )
    print(f"{'sequence'.ljust(width)}  {'count':>7}  {'sampled':>8}  {'P(s|c)':>8}  {'GCD':>8}")
    for key, count, share, exact_share, gcd_share in rows:
        print(f"{key.ljust(width)}  {count:>7}  {percent(share):>8}  {percent(exact_share):>8}  {percent(gcd_share):>8}")
    print(f"status: {result.status}" + (f" ({result.message})" if result.message else ""))
    print(f"failures: {result.failures}  invalid: {invalid}  incomplete: {incomplete}")
    complete_valid = {sequence_of[k]: n for k, n in counts.items()}
    if exact and returned and not invalid and not incomplete:
        try:
            test = chi_square(complete_valid, exact)
        except ImportError:
            from adaptrack_lsp.extras import install_command

            print(f"chi-square against P(s|c): needs scipy (the eval extra): {install_command('eval')}")
        else:
            print(
                f"chi-square against P(s|c): statistic {test.statistic:.4g}, "
                f"{test.degrees_of_freedom} dof, p = {test.p_value:.4g}"
            )
    c = result.counters
    print(
        f"counters: lm_calls {c.lm_calls}, tokens_fed {c.tokens_fed}, constraint_checks {c.constraint_checks}, "
        f"backtracks {c.backtracks}, wall {c.wall_seconds:.3f} s"
    )
    return 0
