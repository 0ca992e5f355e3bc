# benchmarks/gpu_fidelity.py over the pairs of the report; run from the repository root
import subprocess,re
def fid(a,b):
    o=subprocess.run(['python3','benchmarks/gpu_fidelity.py',f'reports/gpu-h100x1-loaded-fidelity-runs/{a}/results.json',f'reports/gpu-h100x1-loaded-fidelity-runs/{b}/results.json'],capture_output=True,text=True).stdout
    res={}
    for m in re.finditer(r'b(\d+) (\d+)/(\d+) \(median p50 ratio ([\d.]+)\)',o):
        res[int(m.group(1))]=(int(m.group(2)),int(m.group(3)),float(m.group(4)))
    return res
pairs={
 'benchmark on: new-i vs old-i, i = 1..5':[(f'new-{i}',f'old-{i}') for i in range(1,6)],
 'benchmark on: old-i vs old-(i+1), i = 1..4':[(f'old-{i}',f'old-{i+1}') for i in range(1,5)],
 'benchmark on: new-i vs new-(i+1), i = 1..4':[(f'new-{i}',f'new-{i+1}') for i in range(1,5)],
 'benchmark off: new-nobench-i vs old-nobench-i, i = 1..3':[(f'new-nobench-{i}',f'old-nobench-{i}') for i in range(1,4)],
 'benchmark off: old vs old, consecutive (2 pairs)':[(f'old-nobench-{i}',f'old-nobench-{i+1}') for i in range(1,3)],
 'benchmark off: new vs new, consecutive (2 pairs)':[(f'new-nobench-{i}',f'new-nobench-{i+1}') for i in range(1,3)],
 'new on vs new off (i = 1..3)':[(f'new-{i}',f'new-nobench-{i}') for i in range(1,4)],
}
print('| comparison (A vs B) | b256 within ±3 % | b256 median p50 A/B | b32 within | b32 median | b1 within | b1 median |')
print('|---|---|---|---|---|---|---|')
for name,ps in pairs.items():
    rs=[fid(a,b) for a,b in ps]
    cells=[]
    for B in (256,32,1):
        ins=[r[B][0] for r in rs]; tot=rs[0][B][1]; med=[r[B][2] for r in rs]
        cells.append(f"{', '.join(map(str,ins))} (of {tot})"); cells.append(f"{min(med):.3f}-{max(med):.3f}")
    print(f'| {name} | '+' | '.join(cells)+' |')
