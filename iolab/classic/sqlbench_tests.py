"""The eight sql-bench tests, written anew for iolab (the original is Perl/DBI: MySQL's sql-bench,
``sql-bench/test-*.sh`` in the MariaDB/server repository; read there, not copied).

Each test is ``run_<name>(db, n)``: ``db`` opens connections (``db.connect()``),
``n(count)`` scales a published loop count or size (``max(1, round(count *
scale))``). A test returns its parts' elapsed seconds (sql-bench prints one
``Time for <part>`` line per part; the test's total is what the article shows).
The counts at a scale come from :mod:`iolab.classic.sqlbench_sizes` (the same
numbers ``iolab recipes sqlbench`` lists).

Published sizes (the ``$opt_...`` defaults at the top of each test-*.sh):

========== ==================================================================
ATIS        29 tables from Data/ATIS/*.txt, selects run 5000 times
            (``$opt_loop_count=5000``): simple joins, join, key-prefix join,
            distinct, group. The data files are not reproduced: iolab builds
            the tables the queries use with generated rows of the same shape.
alter-table 1000 rows, start 8 int columns, add one column per ALTER up to
            1000 columns, 8 create/drop index, drop back to 8.
big-tables  a 1000-column table: 70000 x select * from a 1-row table,
            70000 x select all named columns, 70000 x insert, twice.
connect     500000 loops, connects 50000 (loop/10): connect/disconnect,
            connect+select, select, connect+select 1 row, select 1/2 rows,
            column arithmetic, 65000-byte blob fetched 50000 times.
create      400 tables created, counted and dropped; 10000 create+drop;
            10000 create+drop of a 16-key table.
insert      ``$opt_loop_count=100000`` = rows/3: 100000 rows in order, 100000
            in reverse, 100000 at random into a 2-key table, 100000 duplicate
            inserts (refused), then (iolab's subset) selects by key and range,
            updates and deletes.
select      10000 rows in a 3-key table (regions A-F, 100 groups), 10000 x
            select_cache, 70 big selects, min/max and count on keys 10000 x,
            group and distinct counts 7000 x.
wisconsin   onek (1000 rows), tenk1, tenk2, Bprime (10000 rows each), delete
            Bprime >= 1000, then the Wisconsin queries, selects 5000 times.
========== ==================================================================

sql-bench stops a loop early when it predicts the rest would exceed its time
limit and prints "Estimated time" (``predict_query_time``); iolab always runs
the full (scaled) count, so its seconds are measured, never estimated.
"""
from __future__ import annotations

import random
import time

from iolab.classic.sqlbench_sizes import ATIS_ROWS, sizes

TESTS = ("ATIS", "alter-table", "big-tables", "connect", "create", "insert", "select", "wisconsin")


class Parts(dict):
    """Elapsed seconds per part, timed with ``with parts.timed(name):``."""

    def timed(self, name):
        parts = self

        class _Timer:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                parts[name] = parts.get(name, 0.0) + time.perf_counter() - self.t0
        return _Timer()


def _many(cur, queries):
    for q in queries:
        cur.execute(q)
        cur.fetchall()


# --------------------------------------------------------------------------- create

def _bench_columns():
    return "i int NOT NULL, d double, f float, s char(10), v varchar(100), primary key (i)"


def _key_columns():
    cols = ["field1 tinyint not null", "field2 mediumint not null", "field3 smallint not null",
            "field4 char(16) not null", "field5 integer not null", "field6 float not null", "field7 double not null"]
    cols += [f"field{i} char(5) not null" for i in range(8, 17)]
    keys = ["primary key (" + ",".join(f"field{i}" for i in range(1, 17)) + ")"]
    keys += [f"index index{i} (field{i})" for i in range(2, 17)]
    return ", ".join(cols + keys)


def run_create(db, n) -> Parts:
    parts, conn = Parts(), db.connect()
    size = sizes("create", n)
    cur, tables, loops = conn.cursor(), size["tables"], size["loops"]
    with parts.timed("create_MANY_tables"):
        for i in range(1, tables + 1):
            cur.execute(f"create table bench_{i} ({_bench_columns()})")
    with parts.timed("select_group_when_MANY_tables"):
        _many(cur, (f"select count(*) from bench_{i}" for i in range(1, tables + 1)))
    with parts.timed("drop_table_when_MANY_tables"):
        for i in range(1, tables + 1):
            cur.execute(f"drop table bench_{i}")
    _create_drop(parts, "create+drop", cur, loops, _bench_columns())
    _create_drop(parts, "create_key+drop", cur, loops, _key_columns())
    conn.close()
    return parts


def _create_drop(parts: Parts, name: str, cur, loops: int, columns: str) -> None:
    """The part ``name``: ``loops`` times create a table with ``columns`` and drop it."""
    with parts.timed(name):
        for i in range(1, loops + 1):
            cur.execute(f"create table bench_{i} ({columns})")
            cur.execute(f"drop table bench_{i}")


# --------------------------------------------------------------------------- alter-table

def run_alter_table(db, n) -> Parts:
    parts, conn = Parts(), db.connect()
    size = sizes("alter-table", n)
    cur, start, rows, fields = conn.cursor(), size["start_fields"], size["rows"], size["fields"]
    cur.execute("create table bench (" + ", ".join(f"i{i} int not null" for i in range(1, start + 1)) + ")")
    with parts.timed("insert"):
        for r in range(rows):
            cur.execute("insert into bench values (" + ",".join([str(r)] * start) + ")")
    with parts.timed("alter_table_add"):
        for f in range(start + 1, fields + 1):
            cur.execute(f"alter table bench add i{f} integer")
    with parts.timed("create_index"):
        for i in range(1, size["indexes"] + 1):
            cur.execute(f"create index bench_ind{i} on bench (i{i})")
    with parts.timed("drop_index"):
        for i in range(1, size["indexes"] + 1):
            cur.execute(f"drop index bench_ind{i} on bench")
    with parts.timed("alter_table_drop"):
        for f in range(fields, start, -1):
            cur.execute(f"alter table bench drop i{f}")
    cur.execute("drop table bench")
    conn.close()
    return parts


# --------------------------------------------------------------------------- big-tables

def run_big_tables(db, n) -> Parts:
    parts, conn = Parts(), db.connect()
    size = sizes("big-tables", n)
    cur, loops, fields = conn.cursor(), size["loops"], size["fields"]
    names = ",".join(f"i{i}" for i in range(1, fields + 1))
    values = ",".join(["1"] * fields)
    cur.execute("create table bench1 (" + ", ".join(f"i{i} int" for i in range(1, fields + 1)) + ")")
    cur.execute(f"insert into bench1 values ({values})")
    with parts.timed("select_many_fields"):
        _many(cur, ["select * from bench1"] * loops)
        _many(cur, [f"select {names} from bench1 limit 1"] * loops)
    with parts.timed("insert_many_fields"):
        for _ in range(loops):
            cur.execute(f"insert into bench1 values ({values})")
        for _ in range(loops):
            cur.execute(f"insert into bench1 ({names}) values ({values})")
    cur.execute("drop table bench1")
    conn.close()
    return parts


# --------------------------------------------------------------------------- connect

def run_connect(db, n) -> Parts:
    size = sizes("connect", n)
    parts, loops, small = Parts(), size["loops"], size["connects"]
    with parts.timed("connect"):
        for _ in range(small):
            db.connect().close()
    with parts.timed("connect+select_simple"):
        for i in range(small):
            c = db.connect()
            _many(c.cursor(), [f"select {i}"])
            c.close()
    conn = db.connect()
    cur = conn.cursor()
    with parts.timed("select_simple"):
        _many(cur, (f"select {i}" for i in range(loops)))
    cur.execute("create table bench1 (a int NOT NULL, i int, s char(10), primary key (a))")
    cur.execute("insert into bench1 values (1,100,'AAA')")
    with parts.timed("connect+select_1_row"):
        for i in range(small):
            c = db.connect()
            _many(c.cursor(), [f"select a,i,s,{i} from bench1"])
            c.close()
    with parts.timed("select_1_row"):
        _many(cur, (f"select a,i,s,{i} from bench1" for i in range(loops)))
    cur.execute("insert into bench1 values (2,200,'BBB')")
    with parts.timed("select_2_rows"):
        _many(cur, (f"select a,i,s,{i} from bench1" for i in range(loops)))
    with parts.timed("select_column+column"):
        _many(cur, (f"select a+a+a+a+a+a+a+a+a+{i} from bench1" for i in range(loops)))
    cur.execute("drop table bench1")
    cur.execute("create table bench1 (b longblob)")
    cur.execute("insert into bench1 values (%s)", ("A" * size["blob_bytes"],))
    with parts.timed("select_big_str"):
        _many(cur, (f"select b,{i} from bench1" for i in range(small)))
    cur.execute("drop table bench1")
    conn.close()
    return parts


# --------------------------------------------------------------------------- insert

def run_insert(db, n) -> Parts:
    import pymysql
    parts, conn = Parts(), db.connect()
    cur, rows = conn.cursor(), sizes("insert", n)["rows"]  # $opt_loop_count = rows/3: in order, reverse, random
    total = rows * 3
    cur.execute("create table bench1 (id int NOT NULL, id2 int NOT NULL, id3 int NOT NULL, dummy1 char(30),"
                " primary key (id,id2), index index_id3 (id3))")
    order = list(range(rows, 2 * rows))
    random.Random(1).shuffle(order)
    with parts.timed("insert"):
        for i in range(rows):
            cur.execute(f"insert into bench1 values ({i},{i},{i},'ABCDEFGHIJ')")
        for i in range(rows):
            cur.execute(f"insert into bench1 values ({total - 1 - i},{total - 1 - i},{total - 1 - i},'BCDEFGHIJK')")
        for key in order:
            cur.execute(f"insert into bench1 values ({key},{key},{key},'CDEFGHIJKL')")
    with parts.timed("insert_duplicates"):
        for i in range(rows):
            try:
                cur.execute(f"insert into bench1 values ({i * 7 % total},{i * 7 % total},2,'D')")
            except pymysql.err.IntegrityError:
                continue
            raise RuntimeError(f"no error inserting the duplicate key {i * 7 % total}")
    with parts.timed("select_key"):
        _many(cur, (f"select * from bench1 where id={key}" for key in order))
    with parts.timed("select_range"):
        _many(cur, (f"select * from bench1 where id>={i} and id<{i + 100}" for i in range(0, total, 100)))
    with parts.timed("update_of_key"):
        for i in range(0, rows, 2):
            cur.execute(f"update bench1 set id3={rows + i} where id={i}")
    with parts.timed("update_with_key"):
        for i in range(0, rows, 3):
            cur.execute(f"update bench1 set dummy1='updated' where id={i} and id2={i}")
    with parts.timed("delete_range"):
        for i in range(0, total, 1000):
            cur.execute(f"delete from bench1 where id>={i} and id<{i + 500}")
    with parts.timed("delete_all"):
        cur.execute("delete from bench1")
    cur.execute("drop table bench1")
    conn.close()
    return parts


# --------------------------------------------------------------------------- select

def run_select(db, n) -> Parts:
    parts, conn = Parts(), db.connect()
    size = sizes("select", n)
    cur, rows, medium, small = conn.cursor(), size["rows"], size["medium"], size["small"]
    regions, groups = size["regions"], size["groups"]
    cur.execute("create table bench1 (region char(1) NOT NULL, idn integer NOT NULL, rev_idn integer NOT NULL,"
                " grp integer NOT NULL, grp_no_key integer NOT NULL, primary key (region,idn),"
                " unique (region,rev_idn), unique (region,grp,idn))")
    with parts.timed("insert"):
        for i in range(rows):
            grp = i * 3 % groups
            cur.execute(f"insert into bench1 values ('{chr(65 + i % regions)}',{i},{rows - 1 - i},{grp},{grp})")
    with parts.timed("select_cache"):
        _many(cur, ["select sum(idn+100),sum(rev_idn-100) from bench1"] * rows)
        _many(cur, (f"select sum(idn+{t}),sum(rev_idn-{t}) from bench1" for t in range(rows)))
    with parts.timed("select_big"):
        for i in range(small):
            g, r = i * 11 % groups, chr(65 + i % (regions + 1))
            _many(cur, [f"select idn from bench1 where region='{r}'",
                        f"select idn from bench1 where region='{r}' and idn={i}",
                        f"select idn from bench1 where region='{r}' and rev_idn={i}",
                        f"select idn from bench1 where region='{r}' and grp={g}",
                        f"select idn from bench1 where region>='B' and region<='C' and grp={g}",
                        f"select idn from bench1 where region>='B' and region<='E' and grp={g}",
                        f"select idn from bench1 where grp={g}"])
    with parts.timed("min_max_count_on_key"):
        for t in range(rows):
            g, r = t * 3 % groups, chr(65 + t % regions)
            _many(cur, [f"select min(rev_idn) from bench1 where region='{r}'",
                        f"select max(idn) from bench1 where region='{r}' and grp={g}",
                        f"select count(*) from bench1 where region='{r}' and grp={g}",
                        f"select count(*) from bench1 where region>'{r}'"])
    with parts.timed("count_group"):
        for q in ("select grp,count(*) from bench1 group by grp",
                  "select grp_no_key,count(*) from bench1 group by grp_no_key",
                  "select count(distinct grp) from bench1",
                  "select region,count(distinct idn) from bench1 group by region"):
            _many(cur, [q] * medium)
    cur.execute("drop table bench1")
    conn.close()
    return parts


# --------------------------------------------------------------------------- wisconsin

WISC_COLUMNS = ("unique1 int NOT NULL, unique2 int NOT NULL, two int, four int, ten int, twenty int,"
                " hundred int NOT NULL, thousand int, twothousand int, fivethous int, tenthous int, odd int,"
                " even int, stringu1 char(16), stringu2 char(16), string4 char(16)")


def _wisc_rows(count: int, seed: int):
    """Wisconsin rows: unique1 a permutation, unique2 in order, the other columns derived from unique1."""
    perm = list(range(count))
    random.Random(seed).shuffle(perm)
    for u2, u1 in enumerate(perm):
        s1, s2 = f"A{u1:07d}xxxxxxx", f"B{u2:07d}xxxxxxx"
        yield (u1, u2, u1 % 2, u1 % 4, u1 % 10, u1 % 20, u1 % 100, u1 % 1000, u1 % 2000, u1 % 5000, u1 % 10000,
               (u1 % 100) * 2, (u1 % 100) * 2 + 1, s1, s2, ("AAAA", "HHHH", "OOOO", "VVVV")[u2 % 4] + "xxx")


def run_wisconsin(db, n) -> Parts:
    parts, conn = Parts(), db.connect()
    size = sizes("wisconsin", n)
    cur, big, loops = conn.cursor(), size["tenk"], size["loops"]
    tables = {"onek": size["onek"], "tenk1": big, "tenk2": big, "Bprime": big}
    with parts.timed("create_table"):
        for i, name in enumerate(tables, 1):
            cur.execute(f"create table {name} ({WISC_COLUMNS}, unique (unique1), unique (unique2),"
                        f" index hundred{i} (hundred))")
    with parts.timed("insert"):
        for seed, (name, count) in enumerate(tables.items()):
            for row in _wisc_rows(count, seed):
                cur.execute(f"insert into {name} values (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)", row)
    with parts.timed("delete_big"):
        cur.execute("delete from Bprime where unique2 >= 1000")
    selects = ["select * from tenk1 where (unique2 > 301) and (unique2 < 402)",
               "select * from tenk1 where (unique1 > 647) and (unique1 < 1648)",
               "select * from tenk1 where unique2 = 2001",
               "select t1.*, t2.unique1 from tenk1 t1, tenk1 t2 where t1.unique2 = t2.unique2 and t2.unique2 < 1000",
               "select t.*, B.unique1 from tenk1 t, Bprime B where t.unique2 = B.unique2",
               "select t1.*, o.unique1 from onek o, tenk1 t1, tenk1 t2 where o.unique2 = t1.unique2"
               " and t1.unique2 = t2.unique2 and t1.unique2 < 1000 and t2.unique2 < 1000",
               "select two, four, ten, twenty, hundred, string4 from tenk1",
               "select * from onek", "select min(unique2) as x from tenk1"]
    with parts.timed("wisc_benchmark"):
        for q in selects:
            _many(cur, [q] * loops)
        for k, (u1, u2) in enumerate(((10001, 74001), (19991, 60001), (20002, 70002), (50002, 40002))):
            cur.execute(f"insert into tenk1 (unique1, unique2, hundred) values ({u1}, {u2}, 50)")
            cur.execute(f"update tenk1 set unique2 = {10100 + k} where unique2 = {1491 - k * 11}")
            cur.execute(f"delete from tenk1 where unique2 = {877 - k}")
    for name in tables:
        cur.execute(f"drop table {name}")
    conn.close()
    return parts


# --------------------------------------------------------------------------- ATIS (generated data)

ATIS_TABLES = {
    "state": "state_code char(2) NOT NULL, state_name char(25) NOT NULL, country_name char(25) NOT NULL,"
             " primary key (state_code)",
    "city": "city_code char(4) NOT NULL, city_name char(25) NOT NULL, state_code char(2) NOT NULL,"
            " country_name char(25) NOT NULL, time_zone_code char(3) NOT NULL, primary key (city_code)",
    "aircraft": "aircraft_code char(3) NOT NULL, aircraft_type char(64) NOT NULL, engines tinyint NOT NULL,"
                " category char(10) NOT NULL, pay_load int NOT NULL, primary key (aircraft_code)",
    "airline": "airline_code char(2) NOT NULL, airline_name char(64) NOT NULL, primary key (airline_code)",
    "flight": "flight_code int NOT NULL, airline_code char(2) NOT NULL, aircraft_code char(3) NOT NULL,"
              " from_airport char(3) NOT NULL, to_airport char(3) NOT NULL, stops tinyint NOT NULL,"
              " time_elapsed int NOT NULL, primary key (flight_code)",
    "month_name": "month_number tinyint NOT NULL, month_name char(9) NOT NULL, primary key (month_number)",
    "day_name": "day_code tinyint NOT NULL, day_name char(9) NOT NULL, primary key (day_code)",
    "flight_day": "day_mask char(7) NOT NULL, day_code tinyint NOT NULL, day_name char(9) NOT NULL,"
                  " key (day_code)",
}


def _atis_rows():
    rnd = random.Random(7)
    yield "state", [(f"S{chr(65 + i)}", f"state {i}", "USA") for i in range(ATIS_ROWS["state"])]
    yield "city", [(f"C{i:03d}", f"city {i}", f"S{chr(65 + i % 11)}", "USA", ("EST", "CST", "PST")[i % 3])
                   for i in range(ATIS_ROWS["city"])]
    yield "aircraft", [(f"A{i:02d}", f"type {i}", 1 + i % 4, ("JET", "PROPELLER", "TURBOPROP")[i % 3],
                        (i * 1500) % 40000) for i in range(ATIS_ROWS["aircraft"])]
    yield "airline", [(f"L{i}", f"airline {i}") for i in range(ATIS_ROWS["airline"])]
    yield "flight", [(100000 + i, f"L{i % 10}", f"A{i % 22:02d}", f"P{i % 9}", f"P{(i * 7 + 1) % 9}", i % 3,
                      60 + rnd.randrange(300)) for i in range(ATIS_ROWS["flight"])]
    yield "month_name", [(i, f"month {i}") for i in range(1, ATIS_ROWS["month_name"] + 1)]
    yield "day_name", [(i, f"day {i}") for i in range(1, ATIS_ROWS["day_name"] + 1)]
    yield "flight_day", [(f"{i:07b}", 1 + i % 7, f"day {1 + i % 7}") for i in range(ATIS_ROWS["flight_day"])]


ATIS_QUERIES = {
    "select_simple_join": [
        "select city.city_name,state.state_name,city.city_code from city,state where city.city_code='C001'"
        " and city.state_code=state.state_code",
        "select city.city_name,state.state_name,city.city_code from state,city where city.state_code=state.state_code",
        "select month_name.month_name,day_name.day_name from month_name,day_name"
        " where month_name.month_number=day_name.day_code",
        "select flight.flight_code,aircraft.aircraft_type from flight,aircraft"
        " where flight.aircraft_code=aircraft.aircraft_code"],
    "select_join": [
        "select airline.airline_name,aircraft.aircraft_type from aircraft,airline,flight"
        " where flight.aircraft_code=aircraft.aircraft_code and flight.airline_code=airline.airline_code"],
    "select_distinct": ["select distinct category from aircraft", "select distinct from_airport from flight",
                        "select distinct aircraft_code from flight"],
    "select_group": [
        "select day_name.day_name,count(*) from flight_day,day_name where day_name.day_code=flight_day.day_code"
        " group by day_name.day_name", "select sum(engines) from aircraft", "select avg(engines) from aircraft",
        "select count(*),min(pay_load),max(pay_load) from aircraft where pay_load>0",
        "select count(*) from flight where flight_code >= 100300",
        "select category,count(*) from aircraft where engines=2 group by category having count(*)>1"],
}


def run_atis(db, n) -> Parts:
    parts, conn = Parts(), db.connect()
    cur, loops = conn.cursor(), sizes("ATIS", n)["loops"]
    with parts.timed("create_table"):
        for name, columns in ATIS_TABLES.items():
            cur.execute(f"create table {name} ({columns})")
    with parts.timed("insert"):
        for name, rows in _atis_rows():
            marks = ",".join(["%s"] * len(rows[0]))
            for row in rows:
                cur.execute(f"insert into {name} values ({marks})", row)
    for part, queries in ATIS_QUERIES.items():
        with parts.timed(part):
            for _ in range(loops):
                _many(cur, queries)
    with parts.timed("drop_table"):
        for name in ATIS_TABLES:
            cur.execute(f"drop table {name}")
    conn.close()
    return parts


RUNNERS = {"ATIS": run_atis, "alter-table": run_alter_table, "big-tables": run_big_tables, "connect": run_connect,
           "create": run_create, "insert": run_insert, "select": run_select, "wisconsin": run_wisconsin}
