from __future__ import annotations


def trained_model(kind: str):
    """The argparse ``type`` of a ``--model`` that takes a trained ``kind``'s name or a folder: a misspelled name or
    a missing folder raises the loader's own [`UserError`][structattn.errors.UserError] when the command line is read,
    before anything is imported or loaded ([`structattn.models.trained.resolve`][structattn.models.trained.resolve];
    ``structattn.cli.main`` prints it as one line). The value stays as given."""
    def check(value: str) -> str:
        from ..errors import UserError
        from ..models.trained import resolve

        if not resolve(value, kind).exists():
            raise UserError(f"{value}: no such model folder; give the final/ or best/ folder of a run, or a trained "
                            f"{kind}'s name (`structattn models`)")
        return value

    return check
