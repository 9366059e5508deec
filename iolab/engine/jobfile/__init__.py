"""fio job files as iolab reads them: fio's own reading (:mod:`.reader`), the rules it applies
(:mod:`.rules`), what each job touches (:mod:`.access`), and the safety gate and server check built on
them (:mod:`.gate`, :mod:`.check`)."""
