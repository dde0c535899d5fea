"""``structattn translate --model DIR|NAME``: English lines from stdin or --input, German lines to stdout or --output.

The training preprocessing is applied (NFC, the model's BPE) and the output is detokenised. An empty input
line gives an empty output line; a line over the model's position limit is cut (the count is printed on
stderr); empty input gives empty output. The model is loaded before the input is read, so a bad ``--model``
fails at once (exit 2) even when the input would be empty or never end. Input that is not UTF-8 is an error
naming ``FILE:LINE`` or ``<stdin>:LINE`` (`structattn.io.read_input_lines`), and so is a control character
(NUL and other C0 controls but tab). ``--input`` and ``--output`` are checked before the model loads
(`structattn.paths`). See [`structattn.translation.translator`][structattn.translation.translator].
"""
from __future__ import annotations

import sys
from pathlib import Path


def add_parser(sub) -> None:
    from ..cli_grammar import add_line_io_flags
    from . import trained_model

    p = sub.add_parser("translate", help="translate text with a trained translation model",
                       description="Translate one sentence per line (stdin or --input) with a model folder saved by "
                                   "`structattn train-translation` (its final/ or best/ folder) or a shipped "
                                   "model's name (`structattn models`).")
    add_line_io_flags(p, "translator", "a model folder (config.json, model.safetensors, tokenizer)", "one sentence",
                      "the translation", model_type=trained_model("translator"))
    p.add_argument("--beam", type=int, default=5, help="beam size (default 5; 1 = greedy)")
    p.add_argument("--length-penalty", type=float, default=1.0,
                   help="exponent of the length normalisation of beam scores (default 1.0)")
    p.add_argument("--max-tokens", type=int, default=4096, help="padded source tokens x beam per batch (default 4096)")
    p.add_argument("--parser", default=None, help="spaCy pipeline for models whose mechanism reads a parse "
                                                  "(default: the one the model was trained with)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..errors import UserError
    from ..io import atomic_write_text, read_input_lines
    from ..translation.translator import Translator
    from ..paths import check_input_file, check_output_file

    if args.beam < 1:
        raise UserError(f"--beam must be at least 1, got {args.beam}")
    if args.max_tokens < 1:
        raise UserError(f"--max-tokens must be positive, got {args.max_tokens}")
    check_input_file(args.input, "--input")
    check_output_file(args.output, "--output")
    translator = Translator.load(args.model, parser_name=args.parser)  # a bad --model fails before any input is read
    source, lines = read_input_lines(args.input)
    outputs = translator.translate(lines, beam=args.beam, length_penalty=args.length_penalty,
                                   max_tokens=args.max_tokens) if lines else []
    blank = sum(1 for line in lines if not line.strip())
    if blank:
        print(f"translate: {blank} blank line(s) of {source}: an empty output line each", file=sys.stderr)
    if translator.last_cut:
        print(f"translate: {translator.last_cut} line(s) longer than the model's {translator.max_source_pieces} "
              "source pieces were cut to fit", file=sys.stderr)
    text = "".join(o + "\n" for o in outputs)
    if args.output != "-":
        atomic_write_text(Path(args.output), text)
    else:
        sys.stdout.write(text)
    return 0
