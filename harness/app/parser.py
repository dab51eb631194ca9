"""The CLI's argument parser: argparse, plus "did you mean" for a mistyped verb or flag.

argparse (3.11) names the bad word and lists every choice; this adds the closest one
(difflib), for verbs at any depth (`harness reprot`, `harness trace stat`) and for flags of the
verb the line named (`harness replay --concurency 4`).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from typing import NoReturn

from harness.yamlconf import did_you_mean

_CHOICE = re.compile(r"invalid choice: '([^']*)'")


class Parser(argparse.ArgumentParser):
    argv: list[str] = []  # the words being parsed, for an error raised inside a verb's parser
    # a verb that sets scenario fields with --set: flag -> field (`harness replay`'s flags), so a
    # flag it lacks gets the --set that does the same
    scenario_fields: dict[str, str] = {}

    def error(self, message: str) -> NoReturn:
        bad = _CHOICE.search(message)
        if bad is not None:
            message = message.split(" (choose from")[0] + did_you_mean(bad[1], self._verbs())
        elif message.startswith("the following arguments are required"):
            message += self._unknown_flag_hint()  # a typo in a required flag reads as missing
        # one line, not the whole usage: --help has it
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def _unknown_flag_hint(self) -> str:
        known = self._option_string_actions
        for word in Parser.argv:
            flag = word.split("=")[0]
            if flag.startswith("--") and flag not in known:
                hint = did_you_mean(flag, known)
                if hint:
                    return f" ({flag} is not a flag{hint})"
        return ""

    def parse_args(self, args=None, namespace=None):
        Parser.argv = [str(a) for a in args] if args is not None else _argv()
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            leaf = self._leaf(list(args) if args is not None else _argv())
            flag = next((e.split("=")[0] for e in extras if e.startswith("-")), "")
            hint = did_you_mean(flag, leaf._option_string_actions) if flag else ""
            if flag and isinstance(leaf, Parser) and leaf.scenario_fields:
                hint = leaf.set_hint(flag, extras) or hint
            leaf.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed

    def set_hint(self, flag: str, extras: list[str]) -> str:
        """'; harness run sets scenario fields with --set: --set load.concurrency=3' for a flag
        that is (or nearly is) one of `harness replay`'s, on a verb that takes --set instead,
        when it is nearer to that than to a flag of the verb's own; '' otherwise."""
        close = difflib.get_close_matches(flag, list(self.scenario_fields), n=1, cutoff=0.6)
        own = difflib.get_close_matches(flag, list(self._option_string_actions), n=1, cutoff=0.6)
        if not close or own and _likeness(flag, own[0]) >= _likeness(flag, close[0]):
            return ""
        at = next(i for i, e in enumerate(extras) if e.split("=")[0] == flag)
        given = extras[at].partition("=")[2] or (extras[at + 1 : at + 2] or ["VALUE"])[0]
        value = "VALUE" if given.startswith("-") else given
        field = self.scenario_fields[close[0]]
        return f"; {self.prog} sets scenario fields with --set: --set {field}={value}"

    def _verbs(self) -> list[str]:
        return [name for a in self._subparsers_actions() for name in a.choices]

    def _subparsers_actions(self) -> list[argparse._SubParsersAction]:
        return [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]

    def _leaf(self, argv: list[str]) -> argparse.ArgumentParser:
        """The deepest (sub)parser the words of `argv` name: whose flags a typo is near."""
        parser: argparse.ArgumentParser = self
        for word in argv:
            subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            chosen = next((a.choices[word] for a in subs if word in a.choices), None)
            if chosen is not None:
                parser = chosen
        return parser


def _likeness(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def _argv() -> list[str]:
    return sys.argv[1:]
