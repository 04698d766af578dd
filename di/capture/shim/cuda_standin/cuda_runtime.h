/* Stand-in for building the NCCL shim where nccl.h is present but the CUDA toolkit's
 * headers are not: the shim only passes cudaStream_t through (and nccl.h names cudaEvent_t). */
#ifndef DI_CUDA_STANDIN_H
#define DI_CUDA_STANDIN_H
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
#define CUDART_VERSION 0
#endif
