#!/bin/bash
# k37m: new (main) vs old (models/ from 40eec7c) eager PyTorch GPU rows, alternating, cudnn benchmark on/off
set -u
T0=$(date +%s)
R=$OUT/runs; mkdir -p $R
NEW=$PWD
rm -rf /tmp/old && mkdir /tmp/old && tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C /tmp/old
tar xf build/k37m/old-models.tar -C /tmp/old && rm -f /tmp/old/infer_compare/models/loaded.py
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import torch,sys;print(sys.version.split()[0],torch.__version__,torch.version.cuda,torch.backends.cudnn.version())"; nproc; } > $R/env.txt 2>&1
(cd $NEW && PYTHONPATH=$NEW python3 -c "import infer_compare.models as m,os;print('new',m.__file__,os.path.exists(os.path.dirname(m.__file__)+'/loaded.py'))") >> $R/env.txt 2>&1
(cd /tmp/old && PYTHONPATH=/tmp/old python3 -c "import infer_compare.models as m,os;print('old',m.__file__,os.path.exists(os.path.dirname(m.__file__)+'/loaded.py'))") >> $R/env.txt 2>&1
cat $R/env.txt
one() { # name code extra...
  local name=$1 code=$2; shift 2
  local el=$(( $(date +%s) - T0 ))
  if [ $el -gt ${GUARD:-330} ]; then echo "SKIP $name at ${el}s"; echo "$name skipped at ${el}s" >> $R/walls.txt; return; fi
  local dir=$NEW; [ $code = old ] && dir=/tmp/old
  local s=$(date +%s.%N)
  (cd $dir && PYTHONPATH=$dir python3 -m infer_compare --model resnet50 --backends pytorch --device cuda:0 --cache-dir /tmp/c1 -q "$@" -o $R/$name > $R/$name.log 2>&1)
  local rc=$?
  local e=$(date +%s.%N)
  echo "$name rc=$rc wall=$(python3 -c "print(round($e-$s,1))") start=${el}s args=$*" | tee -a $R/walls.txt
}
one warmup new
for i in 1 2 3; do one new-$i new; one old-$i old; done
for i in 1 2 3; do one new-nobench-$i new --no-cudnn-benchmark; one old-nobench-$i old --no-cudnn-benchmark; done
for i in 4 5; do one new-$i new; one old-$i old; done
cd $R && rm -f */results.csv */results.html && tar czf $OUT/runs.tgz . && du -sh $OUT/runs.tgz
