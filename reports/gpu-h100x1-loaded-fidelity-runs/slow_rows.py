# device p50 (CUDA events) of each PyTorch GPU row per run; * = over 1.3 x the fastest of the runs in that group
# run from the repository root: python3 reports/gpu-h100x1-loaded-fidelity-runs/slow_rows.py
import json
def rows(n):
    d=json.load(open(f'reports/gpu-h100x1-loaded-fidelity-runs/{n}/results.json')); out={}
    for r in d['rows']:
        if r['status']=='ok' and r['device'].startswith('cuda'):
            out[(r['precision'],r['batch_size'])]=(r['latency']['p50_ms'],r['extra']['device_ms_p50'])
    return out
P=['fp32','tf32','fp16','bf16']; B=[1,32,256]
groups={'on':[f'{c}-{i}' for i in range(1,6) for c in ('new','old')],
        'off':[f'{c}-nobench-{i}' for i in range(1,4) for c in ('new','old')]}
R={n:rows(n) for g in groups.values() for n in g}
for g,names in groups.items():
    fast={k:min(R[n][k][1] for n in names) for k in R[names[0]]}
    print(f'\n### cudnn benchmark {g}: device p50 ms (CUDA events); * = > 1.3 x fastest of the {len(names)} runs')
    for b in B:
        print(f'\nb{b}: | run | '+' | '.join(P)+' |')
        for n in names:
            cells=[]
            for p in P:
                v=R[n][(p,b)][1]; cells.append(f"{v:.2f}{'*' if v>1.3*fast[(p,b)] else ''}")
            print(f'| {n} | '+' | '.join(cells)+' |')
    for b in B:
        for c in ('new','old'):
            ns=[n for n in names if n.startswith(c)]
            s=sum(R[n][(p,b)][1]>1.3*fast[(p,b)] for n in ns for p in P)
            print(f'slow count b{b} {c}: {s} of {len(ns)*4}')
    # spread per row
    for b in B:
        for p in P:
            for c in ('new','old'):
                vs=[R[n][(p,b)][1] for n in names if n.startswith(c)]
                print(f'  {g} b{b} {p} {c}: min {min(vs):.2f} max {max(vs):.2f} ratio {max(vs)/min(vs):.2f}')
