# Sourced from .gpu-x/src on the GPU host (see snapshot.sh): the package, its native libraries and
# the runtime's launcher in $RT.
export PYTHONPATH=$PWD/python:$PWD ANSOR_NATIVE_LIB=$PWD/../lib/libAnsorMLIR.so ANSOR_OPENMP_LIB=$PWD/../lib/libiomp5.so
export ANSOR_WORKER_MEMORY_MB=0 ANSOR_COMMIT=$(cat ../COMMIT)
RT="bash /tmp/ansor-rt/with-mlir.sh"
rtlib=/tmp/ansor-rt/site/mlir/lib
if [ -d $rtlib ] && [ ! -f $rtlib/libmlir_apfloat_wrappers.so ]; then
  cp ../lib/libmlir_apfloat_wrappers.so $rtlib/
fi
