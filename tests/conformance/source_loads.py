"""What changes each built-in subject's source system while the kit's faults land.
Each load lasts at least the ``seconds`` it is given (``KitSize.load_s``): its pauses
add up to them. And it waits for the kit before its last part (``hold_until_released``),
so however slowly faults land on a loaded machine, none comes after the source stopped
changing. The ``postgres`` CDC subject's load is
tests/support/cdc.py's Loader."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import KafkaException, Producer

from tests.conformance.source_kit import KitAudit
from tests.support.background import BackgroundWork
from tests.support.cdc import reconnect
from tests.support.waiting import wait_for


class DeliveryWatch(BackgroundWork):
    """The load of a connector that makes its records itself (``sequence``, paced by
    its config): its source changes until its last record is delivered, so this ends
    then, or at the first problem (which no later record repairs)."""

    def __init__(self, audit: Callable[[], KitAudit], deadline_s: float) -> None:
        super().__init__()
        self.audit, self.deadline_s = audit, deadline_s

    def work(self) -> None:
        def over() -> bool:
            audit = self.audit()
            return audit.caught_up or bool(audit.problems)

        wait_for(over, self.deadline_s, "every record of the source to be delivered", 1)


class FileWriters(BackgroundWork):
    """Appends line ``seq`` to every file in turn, pausing every 50 lines. Every
    seventh line is written in two halves with a moment between (a task must never take
    half a line), and the last file appears only halfway through, with the lines it
    would have had so far in one write."""

    PAUSE_EVERY = 50

    def __init__(self, directory: Path, files: int, lines: int, seconds: float) -> None:
        super().__init__()
        self.directory, self.files, self.lines = directory, files, lines
        self.pace_s = seconds / max(1, lines // self.PAUSE_EVERY)

    def work(self) -> None:
        late = self.files - 1
        for seq in range(1, self.lines + 1):
            if seq == self.lines:
                self.hold_until_released()
            for f in range(self.files):
                if f == late and seq == 1 + self.lines // 2:
                    self._append(f, b"".join(self._line(f, n) for n in range(1, seq)))
                if f == late and seq <= self.lines // 2:
                    continue
                line = self._line(f, seq)
                if seq % 7 == 0:
                    self._append(f, line[:5])
                    time.sleep(0.001)
                    self._append(f, line[5:])
                else:
                    self._append(f, line)
            if seq % self.PAUSE_EVERY == 0:
                time.sleep(self.pace_s)

    def _line(self, f: int, seq: int) -> bytes:
        return json.dumps({"stream": f"f{f}", "seq": seq}).encode() + b"\n"

    def _append(self, f: int, data: bytes) -> None:
        with (self.directory / f"part-{f}.jsonl").open("ab") as out:
            out.write(data)


class TableWriters(BackgroundWork):
    """Two sessions inserting ``rows`` rows between them, each pausing every 100 rows;
    now and then one holds its transaction open a moment, so a smaller id often commits
    after a larger one."""

    PAUSE_EVERY = 100

    def __init__(self, dsn: str, table: str, rows: int, seconds: float) -> None:
        super().__init__()
        self.dsn, self.table, self.rows = dsn, table, rows
        self.pause_s = seconds / max(1, rows // 2 // self.PAUSE_EVERY)

    def work(self) -> None:
        errors: list[BaseException] = []

        def write(writer: int) -> None:
            rng = random.Random(writer)
            conn: psycopg.Connection[Any] | None = None
            try:
                for n in range(self.rows // 2):
                    if n == self.rows // 2 - 1:
                        self.hold_until_released()
                    conn = conn or reconnect(self.dsn)
                    try:
                        conn.execute(f"INSERT INTO {self.table} (writer) VALUES (%s)", (writer,))
                        if rng.random() < 0.05:
                            time.sleep(rng.uniform(0, 0.02))  # hold a smaller id open
                        conn.commit()
                    except psycopg.OperationalError:
                        if not conn.broken:
                            raise
                        conn.close()  # the server restarted: the table holds whatever
                        conn = None  # committed, the audit's truth
                    if n % self.PAUSE_EVERY == self.PAUSE_EVERY - 1:
                        time.sleep(self.pause_s)
            except BaseException as error:
                errors.append(error)
            finally:
                if conn is not None:
                    conn.close()

        threads = [threading.Thread(target=write, args=(w,)) for w in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]


class UpstreamTransactions(BackgroundWork):
    """Transactions of TXN_RECORDS records over ``streams`` keyed streams (``{"stream":
    "s<i>", "seq": n}``, with headers, one of them without a value), one after another
    with a pause between. Every fourth is preceded by an aborted transaction holding
    poison records, which a mirror reading ``read_committed`` must never copy."""

    TXN_RECORDS = 60

    def __init__(
        self, bootstrap: str, topic: str, streams: int, records: int, seconds: float
    ) -> None:
        super().__init__()
        self.bootstrap, self.topic, self.streams, self.records = bootstrap, topic, streams, records
        transactions = -(-streams * records // self.TXN_RECORDS)
        self.pace_s = seconds / max(1, transactions)

    def work(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "transactional.id": f"load-{uuid.uuid4().hex}"}
        )
        _retried(producer.init_transactions)
        streams = [f"s{s}" for s in range(self.streams)]
        pending = [(stream, seq) for seq in range(1, self.records + 1) for stream in streams]
        for number, start in enumerate(range(0, len(pending), self.TXN_RECORDS)):
            if start + self.TXN_RECORDS >= len(pending):
                self.hold_until_released()
            if number % 4 == 3:
                self._transaction(producer, [("poison", 0)] * self.streams, commit=False)
            self._transaction(producer, pending[start : start + self.TXN_RECORDS], commit=True)
            time.sleep(self.pace_s)

    def _transaction(
        self, producer: Producer, records: list[tuple[str, int]], commit: bool
    ) -> None:
        """One transaction, ended as asked. Under the fault campaign a broker killed or
        paused beneath it times a call out (retried, as librdkafka allows) or aborts the
        transaction (begun again): the upstream then holds each record committed once,
        which is all the audit's truth needs."""
        while True:
            try:
                producer.begin_transaction()
                for stream, seq in records:
                    self._send(producer, stream, seq)
                if commit:
                    _retried(producer.commit_transaction)
                else:
                    producer.flush(30)  # the poison in the log, for a mirror to skip
                    _retried(producer.abort_transaction)
                return
            except KafkaException as error:
                if not error.args[0].txn_requires_abort():
                    raise
                _retried(producer.abort_transaction)

    def _send(self, producer: Producer, stream: str, seq: int) -> None:
        producer.produce(
            self.topic,
            json.dumps({"stream": stream, "seq": seq}).encode(),
            stream.encode(),
            headers=[("seq", str(seq).encode()), ("empty", None)],
        )


def _retried(call: Callable[[float], object], tries: int = 10) -> None:
    """``call(30)`` (a timeout in seconds) again while it fails with an error librdkafka
    calls retriable (a timeout while a broker is away)."""
    for attempt in range(tries):
        try:
            call(30)
            return
        except KafkaException as error:
            if not error.args[0].retriable() or attempt == tries - 1:
                raise
