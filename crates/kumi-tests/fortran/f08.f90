! Fortran 2008 (`use mpi_f08`): typed handles and their comparison, the
! optional ierror, statuses as TYPE(MPI_Status), non-contiguous array
! sections in blocking and nonblocking calls, persistent requests,
! collectives in place, a derived datatype, communicators, groups and a
! Cartesian topology, strings both ways, MPI_ERRORS_RETURN, attributes
! with MPI_COMM_DUP_FN, a user-defined operation, a generalized request
! with module procedures as its callbacks, and the large-count forms
! (MPI_COUNT_KIND counts) under the same generic names.
module f08_ops
  use mpi_f08
  use, intrinsic :: iso_c_binding, only : c_ptr, c_f_pointer
  implicit none
  integer(kind=MPI_ADDRESS_KIND) :: gq_seen = 0
  integer :: gq_freed = 0
contains
  ! inoutvec = invec + 2 * inoutvec, elementwise: not MPI_SUM.
  subroutine twice_sum(invec, inoutvec, len, datatype)
    type(c_ptr), value :: invec, inoutvec
    integer :: len
    type(MPI_Datatype) :: datatype
    integer, pointer :: a(:), b(:)
    call c_f_pointer(invec, a, [len])
    call c_f_pointer(inoutvec, b, [len])
    b = a + 2 * b
  end subroutine twice_sum

  ! A generalized request's callbacks: the query fills the status and
  ! records the extra state it was given; the free callback counts.
  subroutine gq_query(extra_state, status, ierror)
    integer(kind=MPI_ADDRESS_KIND) :: extra_state
    type(MPI_Status) :: status
    integer :: ierror
    gq_seen = extra_state
    call MPI_Status_set_elements(status, MPI_DOUBLE_PRECISION, 2, ierror)
    status%MPI_TAG = 88
    ierror = MPI_SUCCESS
  end subroutine gq_query

  subroutine gq_free(extra_state, ierror)
    integer(kind=MPI_ADDRESS_KIND) :: extra_state
    integer :: ierror
    gq_freed = gq_freed + 1
    ierror = MPI_SUCCESS
  end subroutine gq_free

  subroutine gq_cancel(extra_state, complete, ierror)
    integer(kind=MPI_ADDRESS_KIND) :: extra_state
    logical :: complete
    integer :: ierror
    ierror = MPI_SUCCESS
  end subroutine gq_cancel
end module f08_ops

program f08
  use mpi_f08
  use f08_ops
  implicit none
  integer :: rank, np, ierr, i, j, n, next, prev, cnt, kv
  ! Buffers of nonblocking calls are ASYNCHRONOUS: else the compiler may
  ! keep their values in registers across the wait.
  integer, asynchronous :: a(4, 5), b(4, 5), c(6, 5), x(5)
  integer :: y(8), z(8)
  integer, allocatable :: sq(:), sec(:, :), gv(:)
  type(MPI_Status) :: st, sts(2)
  type(MPI_Request) :: req(2), preq(2)
  type(MPI_Comm) :: dup, half, cart, dup2
  type(MPI_Group) :: world_group, first_group
  type(MPI_Datatype) :: column
  type(MPI_Op) :: op
  integer :: res, ranks(1), tr(1), dims(1), coords(1), src, dst
  logical :: periods(1), flag
  character(len=MPI_MAX_OBJECT_NAME) :: name
  character(len=MPI_MAX_ERROR_STRING) :: msg
  integer(kind=MPI_ADDRESS_KIND) :: val, tag_ub
  integer(kind=MPI_COUNT_KIND) :: big, bigs(64)
  integer(kind=MPI_ADDRESS_KIND) :: displs(64)
  type(MPI_Datatype) :: quad

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, np)
  call check(MPI_COMM_WORLD /= MPI_COMM_SELF .and. MPI_COMM_WORLD == MPI_COMM_WORLD, 'handle ==')
  next = mod(rank + 1, np)
  prev = mod(rank + np - 1, np)
  do j = 1, 5
    do i = 1, 4
      a(i, j) = 1000 * rank + 10 * i + j
    end do
  end do

  ! Blocking: a row (non-contiguous) into a row of another array, with status.
  b = -1
  call MPI_Sendrecv(a(2, :), 5, MPI_INTEGER, next, 7, b(3, :), 5, MPI_INTEGER, prev, 7, &
                    MPI_COMM_WORLD, st, ierr)
  call check(ierr == MPI_SUCCESS, 'sendrecv ierror')
  call check(all(b(3, :) == [(1000 * prev + 20 + j, j = 1, 5)]), 'sendrecv row into row')
  call check(all(b(1:2, :) == -1) .and. all(b(4, :) == -1), 'sendrecv leaves the rest')
  call check(st%MPI_SOURCE == prev .and. st%MPI_TAG == 7, 'status source and tag')
  call MPI_Get_count(st, MPI_INTEGER, cnt)
  call check(cnt == 5, 'get_count')

  ! A shorter message into a section: the elements not received stay.
  b = -1
  call MPI_Sendrecv(a(1, 1:2), 2, MPI_INTEGER, next, 8, b(2, :), 5, MPI_INTEGER, prev, 8, &
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  call check(all(b(2, 1:2) == [1000 * prev + 11, 1000 * prev + 12]) .and. all(b(2, 3:5) == -1), &
             'short message into a section')

  ! Nonblocking with sections: the datatype describes the section.
  c = -1
  call MPI_Irecv(c(5, :), 5, MPI_INTEGER, prev, 9, MPI_COMM_WORLD, req(1))
  call MPI_Isend(a(3, :), 5, MPI_INTEGER, next, 9, MPI_COMM_WORLD, req(2))
  call MPI_Waitall(2, req, sts)
  call check(all(c(5, :) == [(1000 * prev + 30 + j, j = 1, 5)]), 'irecv into a row')
  call check(count(c /= -1) == 5, 'irecv wrote only the row')
  call check(req(1) == MPI_REQUEST_NULL .and. req(2) == MPI_REQUEST_NULL, 'requests freed')
  call check(sts(1)%MPI_SOURCE == prev, 'waitall statuses')

  ! The large-count forms: chosen by the counts' kind.
  call MPI_Type_size(MPI_DOUBLE_PRECISION, big)
  call check(big == 8, 'MPI_Type_size with an MPI_COUNT_KIND size')
  c = -1
  call MPI_Irecv(c(2, :), 5_MPI_COUNT_KIND, MPI_INTEGER, prev, 19, MPI_COMM_WORLD, req(1))
  call MPI_Isend(a(1, :), 5_MPI_COUNT_KIND, MPI_INTEGER, next, 19, MPI_COMM_WORLD, req(2))
  call MPI_Waitall(2, req, sts)
  call MPI_Get_count(sts(1), MPI_INTEGER, big)
  call check(big == 5 .and. all(c(2, :) == [(1000 * prev + 10 + j, j = 1, 5)]), 'large-count irecv into a row')
  call check(count(c /= -1) == 5, 'large-count irecv wrote only the row')
  call MPI_Type_contiguous(2_MPI_COUNT_KIND, MPI_INTEGER, quad)
  call MPI_Type_commit(quad)
  bigs(1:np) = 2
  displs(1:np) = [(2 * i, i = 0, np - 1)]
  allocate(gv(2 * np))
  gv = -1
  call MPI_Allgatherv([rank, -rank], 1_MPI_COUNT_KIND, quad, gv, bigs, displs, MPI_INTEGER, MPI_COMM_WORLD)
  call check(all(gv(1:2*np:2) == [(i, i = 0, np - 1)]) .and. all(gv(2:2*np:2) == [(-i, i = 0, np - 1)]), &
             'large-count allgatherv of a derived type')
  call MPI_Type_free(quad)

  ! Persistent requests, started twice.
  call MPI_Recv_init(x, 5, MPI_INTEGER, prev, 10, MPI_COMM_WORLD, preq(1))
  call MPI_Send_init(a(4, :), 5, MPI_INTEGER, next, 10, MPI_COMM_WORLD, preq(2))
  do i = 1, 2
    x = 0
    call MPI_Startall(2, preq)
    call MPI_Waitall(2, preq, MPI_STATUSES_IGNORE)
    call check(all(x == [(1000 * prev + 40 + j, j = 1, 5)]), 'persistent')
  end do
  call MPI_Request_free(preq(1))
  call MPI_Request_free(preq(2))

  ! Collectives: a section broadcast, reductions in place and from a section.
  b = 0
  if (rank == 0) b(1, :) = [1, 2, 3, 4, 5]
  call MPI_Bcast(b(1, :), 5, MPI_INTEGER, 0, MPI_COMM_WORLD)
  call check(all(b(1, :) == [1, 2, 3, 4, 5]) .and. all(b(2:, :) == 0), 'bcast a row')
  x = rank + 1
  call MPI_Allreduce(MPI_IN_PLACE, x, 5, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call check(all(x == np * (np + 1) / 2), 'allreduce in place')
  call MPI_Allreduce(a(1, :), x, 5, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD)
  call check(all(x == [(1000 * (np - 1) + 10 + j, j = 1, 5)]), 'allreduce from a row')
  b = 0
  if (rank == np - 1) b(2, :) = [5, 4, 3, 2, 1]
  call MPI_Ibcast(b(2, :), 5, MPI_INTEGER, np - 1, MPI_COMM_WORLD, req(1))
  call MPI_Wait(req(1), st)
  call check(all(b(2, :) == [5, 4, 3, 2, 1]) .and. count(b /= 0) == 5, 'ibcast a row')
  allocate(sq(np))
  sq = -1
  sq(rank + 1) = rank * rank
  call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, sq, 1, MPI_INTEGER, MPI_COMM_WORLD)
  call check(all(sq == [(j * j, j = 0, np - 1)]), 'allgather in place')
  allocate(sec(2, np))
  sec = -1
  call MPI_Gather(rank, 1, MPI_INTEGER, sec(2, :), 1, MPI_INTEGER, 0, MPI_COMM_WORLD)
  if (rank == 0) call check(all(sec(2, :) == [(j, j = 0, np - 1)]) .and. all(sec(1, :) == -1), &
                            'gather into a row')
  call MPI_Scan(rank, res, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call check(res == rank * (rank + 1) / 2, 'scan')
  ! A nonblocking reduction from a section has one datatype for two
  ! buffers: refused, loudly, rather than wrong.
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)
  call MPI_Iallreduce(a(1, :), x, 5, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req(1), ierr)
  call check(ierr /= MPI_SUCCESS, 'iallreduce from a section refused')

  ! A derived datatype: a column of c, as a vector, against the section.
  call MPI_Type_vector(5, 1, 6, MPI_INTEGER, column)
  call MPI_Type_commit(column)
  c = -1
  call MPI_Sendrecv(a(4, :), 5, MPI_INTEGER, next, 11, c(2, 1), 1, column, prev, 11, &
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  call check(all(c(2, :) == [(1000 * prev + 40 + j, j = 1, 5)]), 'vector datatype')
  call MPI_Type_free(column)
  call check(column == MPI_DATATYPE_NULL, 'type_free nulls the handle')

  ! Communicators, groups, a ring topology.
  call MPI_Comm_dup(MPI_COMM_WORLD, dup)
  call MPI_Comm_compare(dup, MPI_COMM_WORLD, res)
  call check(res == MPI_CONGRUENT, 'comm_compare')
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), -rank, half)
  call MPI_Comm_size(half, n)
  call check(n == (np + 1 - mod(rank, 2)) / 2, 'comm_split size')
  call MPI_Comm_group(MPI_COMM_WORLD, world_group)
  ranks(1) = np - 1
  call MPI_Group_incl(world_group, 1, ranks, first_group)
  tr(1) = 0
  call MPI_Group_translate_ranks(first_group, 1, tr, world_group, ranks)
  call check(ranks(1) == np - 1, 'group translate')
  call MPI_Group_free(first_group)
  call MPI_Group_free(world_group)
  call check(world_group == MPI_GROUP_NULL, 'group_free')
  dims(1) = np
  periods(1) = .true.
  call MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, .false., cart)
  call MPI_Cart_coords(cart, rank, 1, coords)
  call MPI_Cart_shift(cart, 0, 1, src, dst)
  call check(coords(1) == rank .and. src == prev .and. dst == next, 'cart shift')
  call MPI_Comm_free(cart)
  call MPI_Comm_free(half)
  call check(half == MPI_COMM_NULL, 'comm_free')

  ! Strings both ways, and an error's class and text.
  call MPI_Comm_set_name(dup, 'the duplicate   ')
  call MPI_Comm_get_name(dup, name, n)
  call check(name == 'the duplicate' .and. n == 13, 'comm name')
  call MPI_Send(x, 1, MPI_INTEGER, np, 0, MPI_COMM_WORLD, ierr)
  call check(ierr /= MPI_SUCCESS, 'send to a rank that does not exist')
  call MPI_Error_class(ierr, res)
  call check(res == MPI_ERR_RANK, 'error class')
  call MPI_Error_string(ierr, msg, n)
  call check(n > 0 .and. len_trim(msg) == n, 'error string')

  ! Attributes: copied on dup by MPI_COMM_DUP_FN; the tag bound.
  call MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, kv, 0_MPI_ADDRESS_KIND)
  val = 4242
  call MPI_Comm_set_attr(dup, kv, val)
  call MPI_Comm_dup(dup, dup2)
  val = 0
  call MPI_Comm_get_attr(dup2, kv, val, flag)
  call check(flag .and. val == 4242, 'attribute copied by MPI_COMM_DUP_FN')
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, tag_ub, flag)
  call check(flag .and. tag_ub >= 32767, 'MPI_TAG_UB')
  call MPI_Comm_free(dup2)
  call MPI_Comm_free(dup)
  call MPI_Comm_free_keyval(kv)

  ! A user-defined operation.
  call MPI_Op_create(twice_sum, .false., op)
  y = 1
  z = 0
  call MPI_Reduce(y, z, 8, MPI_INTEGER, op, 0, MPI_COMM_WORLD)
  ! Folded in rank order: r(0) = 1, r(k) = 1 + 2 * r(k-1) or r(k-1) + 2:
  ! either way, the result is no sum (np > 1) and is the same everywhere.
  if (rank == 0) call check(all(z == z(1)) .and. (np == 1 .or. z(1) /= np), 'user operation')
  call MPI_Op_free(op)
  call check(op == MPI_OP_NULL, 'op_free')

  ! A generalized request, completed by the program.
  call MPI_Grequest_start(gq_query, gq_free, gq_cancel, 77_MPI_ADDRESS_KIND, req(1))
  call MPI_Grequest_complete(req(1))
  call MPI_Wait(req(1), st)
  call MPI_Get_count(st, MPI_DOUBLE_PRECISION, cnt)
  call check(req(1) == MPI_REQUEST_NULL .and. gq_freed == 1 .and. gq_seen == 77, 'grequest')
  call check(st%MPI_TAG == 88 .and. cnt == 2, 'grequest status')

  call MPI_Barrier(MPI_COMM_WORLD)
  if (rank == 0) print '(a)', 'f08 ok'
  call MPI_Finalize()

contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      print '(a, i0, 2a)', 'rank ', rank, ': wrong: ', what
      call MPI_Abort(MPI_COMM_WORLD, 1)
    end if
  end subroutine check
end program f08
