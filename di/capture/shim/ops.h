/* Operation ids of di's capture shims: the position in this list is the `op`
 * field of a shard record. di/capture/shard.py reads this file to name them, so
 * only append (ids are part of the shard format, schemas/capture/v1). */
#define DI_OPS(X) \
  X(MPI_Init) X(MPI_Init_thread) X(MPI_Finalize) \
  X(MPI_Send) X(MPI_Send_c) X(MPI_Ssend) X(MPI_Ssend_c) X(MPI_Bsend) X(MPI_Bsend_c) \
  X(MPI_Rsend) X(MPI_Rsend_c) X(MPI_Recv) X(MPI_Recv_c) \
  X(MPI_Isend) X(MPI_Isend_c) X(MPI_Issend) X(MPI_Issend_c) X(MPI_Ibsend) X(MPI_Ibsend_c) \
  X(MPI_Irsend) X(MPI_Irsend_c) X(MPI_Irecv) X(MPI_Irecv_c) \
  X(MPI_Sendrecv) X(MPI_Sendrecv_c) X(MPI_Sendrecv_replace) X(MPI_Sendrecv_replace_c) \
  X(MPI_Wait) X(MPI_Waitall) X(MPI_Waitany) X(MPI_Waitsome) \
  X(MPI_Test) X(MPI_Testall) X(MPI_Testany) X(MPI_Testsome) X(MPI_Request_free) \
  X(MPI_Barrier) X(MPI_Ibarrier) \
  X(MPI_Bcast) X(MPI_Bcast_c) X(MPI_Ibcast) X(MPI_Ibcast_c) \
  X(MPI_Reduce) X(MPI_Reduce_c) X(MPI_Ireduce) X(MPI_Ireduce_c) \
  X(MPI_Allreduce) X(MPI_Allreduce_c) X(MPI_Iallreduce) X(MPI_Iallreduce_c) \
  X(MPI_Allgather) X(MPI_Allgather_c) X(MPI_Iallgather) X(MPI_Iallgather_c) \
  X(MPI_Allgatherv) X(MPI_Allgatherv_c) X(MPI_Iallgatherv) X(MPI_Iallgatherv_c) \
  X(MPI_Alltoall) X(MPI_Alltoall_c) X(MPI_Ialltoall) X(MPI_Ialltoall_c) \
  X(MPI_Alltoallv) X(MPI_Alltoallv_c) X(MPI_Ialltoallv) X(MPI_Ialltoallv_c) \
  X(MPI_Gather) X(MPI_Gather_c) X(MPI_Igather) X(MPI_Igather_c) \
  X(MPI_Gatherv) X(MPI_Gatherv_c) X(MPI_Igatherv) X(MPI_Igatherv_c) \
  X(MPI_Scatter) X(MPI_Scatter_c) X(MPI_Iscatter) X(MPI_Iscatter_c) \
  X(MPI_Scatterv) X(MPI_Scatterv_c) X(MPI_Iscatterv) X(MPI_Iscatterv_c) \
  X(MPI_Reduce_scatter) X(MPI_Reduce_scatter_c) X(MPI_Ireduce_scatter) X(MPI_Ireduce_scatter_c) \
  X(MPI_Reduce_scatter_block) X(MPI_Reduce_scatter_block_c) \
  X(MPI_Ireduce_scatter_block) X(MPI_Ireduce_scatter_block_c) \
  X(MPI_Comm_split) X(MPI_Comm_split_type) X(MPI_Comm_dup) X(MPI_Comm_dup_with_info) \
  X(MPI_Comm_create) X(MPI_Comm_create_group) X(MPI_Comm_free) \
  X(open) X(creat) X(close) X(read) X(write) X(pread) X(pwrite) X(readv) X(writev) \
  X(lseek) X(fsync) X(fdatasync) X(mmap) \
  X(fopen) X(fclose) X(fread) X(fwrite) X(fflush) \
  X(ncclAllReduce) X(ncclBroadcast) X(ncclReduce) X(ncclAllGather) X(ncclReduceScatter) \
  X(ncclAlltoAll) X(ncclSend) X(ncclRecv) X(ncclCommInitRank) \
  X(ncclGather) X(ncclScatter) X(ncclCollective) \
  X(MPI_Probe) X(MPI_Iprobe) X(MPI_Mprobe) X(MPI_Improbe) \
  X(MPI_Mrecv) X(MPI_Mrecv_c) X(MPI_Imrecv) X(MPI_Imrecv_c) \
  X(MPI_Send_init) X(MPI_Send_init_c) X(MPI_Ssend_init) X(MPI_Ssend_init_c) \
  X(MPI_Bsend_init) X(MPI_Bsend_init_c) X(MPI_Rsend_init) X(MPI_Rsend_init_c) \
  X(MPI_Recv_init) X(MPI_Recv_init_c) X(MPI_Start) X(MPI_Startall)

#define DI_OP_ENUM(name) OP_##name,
enum di_op { DI_OPS(DI_OP_ENUM) OP_COUNT };

/* Record kinds (the `kind` field); 0 marks a slot never completely written. */
enum di_kind {
  KIND_CALL = 1,     /* one MPI call: op, t0..t1, comm, peer, tag, bytes, req */
  KIND_REQ_DONE = 2, /* a request completed inside the next CALL of this thread */
  KIND_COMM = 3,     /* a communicator: comm id, size, members (string id) */
  KIND_CLOCK = 4,    /* a clock-offset measurement to world rank 0 */
  KIND_IO = 5,       /* one I/O call: op, t0..t1, file (string id), fd, bytes, offset */
  KIND_TICKS = 6,    /* calibration: t0 = ticks, t1 = ns (CLOCK_MONOTONIC) at the same moment */
  KIND_NCCL_WORK = 7, /* NCCL profiler plugin: one kernel channel or proxy op of the CALL with id req */
  KIND_REQ_START = 8, /* a persistent request started inside the next CALL of this thread */
  KIND_USER = 9      /* NVTX range or mark, di.region, Python call (shim/nvtx.c): op = enum di_user_op */
};
