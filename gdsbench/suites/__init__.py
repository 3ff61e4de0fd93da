"""A storage read suite to run as it is, or to copy:

    pytest --pyargs gdsbench.suites --gdsbench-path /mnt/nvme/test.dat --benchmark-autosave

It measures what users ask about first: 4 KiB random reads at QD1 and QD32, 128 KiB and
1 MiB sequential reads, each transfer mode at 1 MiB (those this machine cannot run are
skipped with the reason), and one many-process point. With the defaults (1 repeat of
5 s per test: --gdsbench-runtime, --gdsbench-repeat) it takes about 1 minute.
"""
