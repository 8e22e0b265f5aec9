#!/usr/bin/env python3
# summarize.py - the tables of doc/notes/shm_modes.md from the runs in this folder:
# per configuration, medians over runs of the CPU times and of the ratio cma / copyin.
import glob, os, statistics as st, sys
D = os.path.dirname(os.path.abspath(__file__))
def load(f):
    rows={}
    for l in open(f):
        if l.startswith('#') or l.strip().startswith('size'): continue
        x=l.split()
        if len(x)<10: continue
        rows[x[0]]=[float(v) for v in x[1:]]
    return rows
for pat in ['p2','p2_thp','p4','p4_thp']:
    runs=[load(f) for f in sorted(glob.glob(f'{D}/{pat}_[0-9].txt'))]
    print(f'== {pat} ({len(runs)} runs): size  cma_cpu copyin_cpu floor_cpu (median over runs, us)  cma/copyin cpu  [min..max]   cma/copyin elapsed [min..max]')
    for s in runs[0]:
        c=[r[s][5] for r in runs if s in r]; k=[r[s][6] for r in runs if s in r]; f=[r[s][7] for r in runs if s in r]
        rc=[r[s][5]/r[s][6] for r in runs if s in r]; re=[r[s][0]/r[s][1] for r in runs if s in r]
        print(f'{s:>6} {st.median(c):9.1f} {st.median(k):9.1f} {st.median(f):9.1f}   {st.median(rc):5.2f} [{min(rc):.2f}..{max(rc):.2f}]   {st.median(re):5.2f} [{min(re):.2f}..{max(re):.2f}]')
