"""Turn-taking between the head session (this process) and the base session (a child process).

Every round of every benchmark, on both sides, goes through pytest-benchmark's runner; before a
round each side asks for its turn. The head is the leader: it grants the base its turns so that
the rounds of one benchmark alternate in ABBA order (head, base, base, head, ...), and records the
turn each round ran in. Rounds ``2k`` and ``2k + 1`` form pair ``k``: they ran next to each other,
so whatever the machine did then hit both alike.

The base follows the head's order of tests. A base that is ahead (a test the head has not reached,
or will never run) waits; one that is behind (a test the head skipped or does not have) is served
at once, unpaired. A base that stops answering is dropped after ``TIMEOUT_S`` and the head goes on
alone.

Neither side's untimed work may overlap the other's rounds. The head's first round of a test waits
until the base has reached that test (its setup done), and the base, after its last round of a
test, waits until the head is done with the test too, before its teardown, its report and, after
the last test, its whole session end. (Without that, the base's session end ran beside the head's
last round of the last test: a Keras CNN measured last in a session stated 24-39 % as the smallest
change it could detect, against 4-13 % (one 28 %) for its copies measured earlier in the session.)
The turns also carry what each side's first pinned round of a test showed (``pinning.Pin``): the
base says it when it asks for its next turn, and the head answers every turn with whether either
side wants to let go (threads started within that round did much of its work, or some and pinning
slowed its calls: ``Pin.churned``), so that both let their pins go from the third round on, or
neither does. And they carry the seconds the head sized a ``benchmark(fn)`` test's rounds on
(``sizing.size_rounds_on_turns``), so that the base runs as many rounds as the head.
"""

from __future__ import annotations

import os
import secrets
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from pytest_tpu.sameref.worktree import short_scratch

ADDRESS_ENV = "PYTEST_TPU_REF_ADDRESS"  # the head's socket, in the base's environment
KEY_ENV = "PYTEST_TPU_REF_KEY"  # shared secret: only our child may take turns
TIMEOUT_S = 900.0  # longest the head waits for one answer of the base (a slow first setup)
HEAD, BASE = "head", "base"
# A Unix socket's path holds at most this many bytes (``sockaddr_un.sun_path`` less its NUL).
SOCKET_PATH_MAX = 107
HEAD_GONE_EXIT = 3  # the base session's exit status when the head session went away


def turn_of(count: int) -> str:
    """ABBA: turns 0 and 3 of every four are the head's."""
    return HEAD if count % 4 in (0, 3) else BASE


@dataclass
class Rounds:
    """The turn of every runner call of one benchmark, per side, in call order."""

    head: list[int] = field(default_factory=list)
    base: list[int] = field(default_factory=list)


def open_listener(folder: str) -> tuple[Listener, dict[str, str]]:
    """A listener on a Unix socket in ``folder`` and the environment a base child needs.

    A Unix socket, not TCP on loopback: a turn is a few small messages, and TCP's delayed
    acknowledgements add tens of milliseconds to each of them.
    """
    key = secrets.token_hex(16)
    address = socket_path(folder)
    listener = Listener(address, family="AF_UNIX", authkey=key.encode())
    return listener, {ADDRESS_ENV: address, KEY_ENV: key}


def socket_path(folder: str) -> str:
    """The socket's path in ``folder`` where it fits a Unix socket's limit; else in a short folder
    of its own (``worktree.short_scratch``: removed at exit, or by the next session after a
    SIGKILL). A deep ``TMPDIR`` (a CI workspace's, pytester's under xdist) otherwise ended the
    session with an INTERNALERROR, ``OSError: AF_UNIX path too long``."""
    address = os.path.join(folder, "turns.sock")
    if len(os.fsencode(address)) <= SOCKET_PATH_MAX:
        return address
    short = short_scratch()
    return address if short is None else str(short / "turns.sock")


class Leader:
    """The head's side: grants the base its turns and keeps the pairing."""

    def __init__(self, conn: Connection, order: Sequence[str]) -> None:
        self.conn = conn
        self.position = {nodeid: i for i, nodeid in enumerate(order)}
        self.counts: dict[str, int] = defaultdict(int)
        self.rounds: dict[str, Rounds] = defaultdict(Rounds)
        self.results: dict[str, dict[str, Any]] = {}
        self.pending: str | None = None
        self.current: str | None = None  # the test the head is in
        self.done: str | None = None  # a test the base finished and waits at, until the head has
        self.gone = False
        self.note = ""
        # What each side's first pinned round of a test showed (``pinning.Pin.churned``).
        self.churned: dict[str, dict[str, bool]] = defaultdict(dict)
        # Modules the base took from its own tree, and the checkout's it ran (``imports``).
        self.imported: tuple[list[str], list[str]] = ([], [])
        # The seconds each ``benchmark(fn)`` test's rounds were sized on here (``sizing``),
        # handed to the base with its turns so that both sides run as many rounds.
        self.calibrated: dict[str, float] = {}

    # -------------------------------------------------------------- messages from the base

    def _receive(self) -> None:
        """Read messages until the base asks for a turn, waits at the end of the head's test, or
        leaves; results are kept."""
        while self.pending is None and self.done is None and not self.gone:
            try:
                if not self.conn.poll(TIMEOUT_S):
                    self._drop(f"the base session did not answer for {TIMEOUT_S:g} s")
                    return
                message = self.conn.recv()
            except (EOFError, OSError):
                self._drop("the base session ended")
                return
            self._take(message)

    def _take(self, message: tuple[Any, ...]) -> None:
        """Keep what one message of the base says."""
        kind = message[0]
        if kind == "want":
            self.pending = message[1]
            if len(message) > 2 and message[2] is not None:  # its first pinned round is over
                self.churned[message[1]][BASE] = bool(message[2])
        elif kind == "result":
            self.results[message[1]] = message[2]
        elif kind == "done":
            self.done = message[1]
            if self.done != self.current:  # a test the head is not in: nothing to wait for
                self._release()
        elif kind == "imports":
            self.imported = ([str(n) for n in message[1]], [str(n) for n in message[2]])
        elif kind == "bye":
            self._drop("")

    def _release(self) -> None:
        """Let the base go on past the end of a test."""
        self.done = None
        try:
            self.conn.send(("go",))
        except (EOFError, OSError):
            self._drop("the base session ended")

    def _drop(self, why: str) -> None:
        self.gone = True
        self.pending = None
        if why and not self.note:
            self.note = why

    def _grant(self, nodeid: str | None) -> None:
        """Let the base run the round it asked for; record it when it pairs with ``nodeid``.

        The base's round is over when it asks for its next turn (or leaves): only then is it
        idle, as the head is while the base runs. Going on at a "round done" would let the
        head's next round overlap the base's own bookkeeping (seen: the head 10-60 % slower
        than the same code in the base).
        """
        wanted = self.pending
        self.pending = None
        try:
            sized = self.calibrated.get(wanted) if wanted is not None else None
            self.conn.send(("go", wanted is not None and self.let_go(wanted), sized))
            while self.pending is None and self.done is None and not self.gone:
                self._take(self.conn.recv())
        except (EOFError, OSError):
            self._drop("the base session ended during a round")
            return
        if wanted is not None and wanted == nodeid:
            self.rounds[nodeid].base.append(self.counts[nodeid])
            self.counts[nodeid] += 1

    def _behind(self, wanted: str, nodeid: str) -> bool:
        """The base asks for a test the head already passed, or never runs."""
        where = self.position.get(wanted)
        return where is None or where < self.position.get(nodeid, -1)

    def let_go(self, nodeid: str) -> bool:
        """Whether either side's first pinned round of ``nodeid`` made it want to let go."""
        return any(self.churned.get(nodeid, {}).values())  # a query adds no entry

    def sized_on(self, nodeid: str, seconds: float) -> float:
        """Keep the seconds the head sized ``nodeid``'s rounds on, for the base; returns them."""
        self.calibrated[nodeid] = seconds
        return seconds

    # -------------------------------------------------------------- the head's hooks

    def before_head_round(self, nodeid: str, churned: bool | None = None) -> bool:
        """Give the base its turns before the head's next round of ``nodeid``; ``churned`` is what
        the head's first pinned round of it showed, where over. Returns whether either side's
        did: then both let their pins go."""
        if churned is not None:
            self.churned[nodeid][HEAD] = churned
        if self.current != nodeid:
            self.current = nodeid
            self._wait_for_base(nodeid)
        while turn_of(self.counts[nodeid]) == BASE:
            self._receive()
            if self.gone or self.pending is None:
                break
            if self.pending == nodeid:
                self._grant(nodeid)
            elif self._behind(self.pending, nodeid):
                self._grant(None)
            else:  # the base is past this test: the head goes on alone
                break
        count = self.counts[nodeid]
        if count and turn_of(count - 1) == HEAD and self.pending == nodeid:
            self._hand_over()
        self.rounds[nodeid].head.append(count)
        self.counts[nodeid] += 1
        return self.let_go(nodeid)

    def _wait_for_base(self, nodeid: str) -> None:
        """Before the head's first round of ``nodeid``: the base done with what came before and
        at this test's first round (its setup is not to run beside the head's round), or past
        it, or gone."""
        while not self.gone:
            self._receive()
            if (
                self.pending is None
                or self.pending == nodeid
                or not self._behind(self.pending, nodeid)
            ):
                return
            self._grant(None)  # rounds of a test the head does not have: unpaired

    def _hand_over(self) -> None:
        """A round trip to the waiting base before the head's second round in a row.

        The base's second round in a row follows a round trip through the head (it asks, it
        waits, it wakes); without the same for the head, short rounds measure the wake-up
        (seen: 100 µs rounds of the same code 15-50 % slower on the base side).
        """
        try:
            self.conn.send(("sync",))
            while True:
                message = self.conn.recv()
                if message[0] == "synced":
                    return
                self._take(message)
        except (EOFError, OSError):
            self._drop("the base session ended")

    def after_head_test(self, nodeid: str) -> None:
        """Let the base finish its rounds of ``nodeid`` (and anything it is behind on), then go
        on past its end of the test."""
        while True:
            self._receive()
            if self.done is not None:  # the base has finished this test: both are done now
                self._release()
                break
            if self.gone or self.pending is None:
                break
            if self.pending == nodeid:
                self._grant(nodeid)
            elif self._behind(self.pending, nodeid) or self.pending == "":
                self._grant(None)
            else:
                break
        self.current = None

    def finish(self) -> dict[str, dict[str, Any]]:
        """Serve whatever the base still runs, then take its last results."""
        self.current = None
        while not self.gone:
            self._receive()
            if self.done is not None:
                self._release()
            if self.pending is not None:
                self._grant(None)
        return self.results


class Follower:
    """The base's side: asks for every round and reports every result."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        # What the head sized each test's rounds on, as its turns said (``Leader.sized_on``).
        self.calibrated: dict[str, float] = {}

    @classmethod
    def connect(cls) -> Follower | None:
        address = os.environ.get(ADDRESS_ENV)
        key = os.environ.get(KEY_ENV)
        if not address or not key:
            return None
        return cls(Client(address, family="AF_UNIX", authkey=key.encode()))

    def _talk(self, message: tuple[Any, ...], answer: bool = False) -> tuple[Any, ...]:
        """Send ``message`` (and wait for "go", which it returns); without a head there is
        nothing to measure for, so the base session ends at once rather than run on untimed."""
        try:
            self.conn.send(message)
            while answer:
                reply = tuple(self.conn.recv())
                if reply[0] == "go":
                    return reply
                if reply[0] != "sync":
                    raise EOFError
                self.conn.send(("synced",))  # the head's own round trip (Leader._hand_over)
        except (EOFError, OSError):
            os._exit(HEAD_GONE_EXIT)
        return ()

    def before_round(self, nodeid: str, churned: bool | None = None) -> bool:
        """Ask for a turn; asking also says the previous round, and all around it, is over, and
        what this side's first pinned round showed (``churned``), where over. Returns whether
        either side's did: then both let their pins go."""
        reply = self._talk(("want", nodeid, churned), answer=True)
        if len(reply) > 2 and isinstance(reply[2], float):
            self.calibrated[nodeid] = reply[2]
        return len(reply) > 1 and bool(reply[1])

    def sized_on(self, nodeid: str, seconds: float) -> float:
        """What to size ``nodeid``'s rounds on: the head's seconds where its turns said them by
        now, so that both sides run as many rounds; else this side's own ``seconds``."""
        return self.calibrated.get(nodeid, seconds)

    def done(self, nodeid: str) -> None:
        """After the last round of ``nodeid``: wait until the head is done with it too."""
        self._talk(("done", nodeid), answer=True)

    def result(self, nodeid: str, data: dict[str, Any]) -> None:
        self._talk(("result", nodeid, data))

    def imports(self, moved: list[str], early: list[str]) -> None:
        """The top-level modules this side loaded from its own tree instead of the checkout,
        and the checkout's that it ran, loaded before it could move them."""
        self._talk(("imports", moved, early))

    def bye(self) -> None:
        try:
            self.conn.send(("bye",))
            self.conn.close()
        except OSError:
            pass
