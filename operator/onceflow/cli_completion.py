"""Shell completion for ``onceflow``, written from the argument parser itself so that a
new command or option completes without anyone remembering to add it here.

Bash gets a ``complete -F`` function; zsh loads the same through ``bashcompinit``, as
kubectl's and helm's zsh scripts can. Commands, their options and the choices of an
option complete; every other word completes as a file name, since what the commands
take besides options is manifests and paths.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass

SHELLS = ("bash", "zsh")


@dataclass(frozen=True)
class CommandWords:
    options: list[str]
    option_choices: dict[str, list[str]]
    """Option -> the values it takes, for options with a fixed set."""
    arguments: list[str] | None
    """The fixed set a positional argument takes; None: file names."""


def _words_of(parser: argparse.ArgumentParser) -> CommandWords:
    options: list[str] = []
    choices: dict[str, list[str]] = {}
    arguments: list[str] | None = None
    for action in parser._actions:
        options.extend(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):  # `transactions list|abort`
            arguments = list(action.choices)
        elif action.choices:
            values = [str(c) for c in action.choices]
            if not action.option_strings:
                arguments = values
            for option in action.option_strings:
                choices[option] = values
    return CommandWords(options, choices, arguments)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The commands help lists: those Onceflow's own pods and build run are left out
    here as they are there."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {a.dest for a in action._choices_actions}
            return {name: p for name, p in action.choices.items() if name in listed}
    return {}


def _words(values: list[str]) -> str:
    return shlex.quote(" ".join(values))


def bash_script(parser: argparse.ArgumentParser) -> str:
    prog = parser.prog
    function = f"_{prog}_complete"
    commands = _subcommands(parser)
    top_options = _words_of(parser).options
    cases: list[str] = []
    for name, command in commands.items():
        words = _words_of(command)
        choice_cases = "".join(
            f"        {shlex.quote(option)}) COMPREPLY=($(compgen -W {_words(values)} -- "
            '"$cur")); return ;;\n'
            for option, values in words.option_choices.items()
        )
        others = (
            f'compgen -W {_words(words.arguments)} -- "$cur"'
            if words.arguments is not None
            else 'compgen -f -- "$cur"'
        )
        cases.append(
            f"    {shlex.quote(name)})\n"
            + (f'      case "$prev" in\n{choice_cases}      esac\n' if choice_cases else "")
            + f'      if [[ "$cur" == -* ]]; then\n'
            f'        COMPREPLY=($(compgen -W {_words(words.options)} -- "$cur"))\n'
            f"      else\n"
            f"        COMPREPLY=($({others}))\n"
            f"      fi ;;\n"
        )
    return (
        f"# {prog} completion for bash: source <({prog} completion bash)\n"
        f"{function}() {{\n"
        '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"\n'
        '  local command="" i\n'
        "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
        '    [[ "${COMP_WORDS[i]}" != -* ]] && { command="${COMP_WORDS[i]}"; break; }\n'
        "  done\n"
        '  case "$command" in\n'
        '    "")\n'
        f'      COMPREPLY=($(compgen -W {_words([*commands, *top_options])} -- "$cur")) ;;\n'
        + "".join(cases)
        + "  esac\n"
        "}\n"
        f"complete -o filenames -F {function} {prog}\n"
    )


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + bash_script(parser)
    return bash_script(parser)
