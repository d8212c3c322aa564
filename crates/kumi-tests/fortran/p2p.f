! Point-to-point from Fortran 77 (mpif.h): statuses, wildcards, nonblocking
! and persistent requests with 1-based indices, the ignore sentinels, probe,
! and generalized requests with Fortran callbacks.
      program p2p
      implicit none
      include 'mpif.h'
      integer ierr, rank, np, i, n, next, prev, idx, cnt, outc
      integer st(MPI_STATUS_SIZE), sts(MPI_STATUS_SIZE, 4)
      integer req(4), inds(4), a(8), b(8)
      double precision d(3), e(3)
      logical flag
      integer(kind=MPI_ADDRESS_KIND) extra
      integer nquery, nfree, ncancel
      integer(kind=MPI_ADDRESS_KIND) seen
      logical wasdone
      common /gq/ seen, nquery, nfree, ncancel, wasdone
      external gq_query, gq_free, gq_cancel
!     In a common block: a call may read or write them (the persistent
!     requests hold their addresses), so the compiler keeps no copy.
      common /bufs/ a, b
      call MPI_INIT(ierr)
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
      call MPI_COMM_SIZE(MPI_COMM_WORLD, np, ierr)
      next = mod(rank + 1, np)
      prev = mod(rank + np - 1, np)
!     A ring with sendrecv: the status names the sender, tag and count.
      do i = 1, 8
         a(i) = 100 * rank + i
      end do
      call MPI_SENDRECV(a, 8, MPI_INTEGER, next, 5, b, 8, MPI_INTEGER,
     &     MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, st, ierr)
      call MPI_GET_COUNT(st, MPI_INTEGER, cnt, ierr)
      call check(ierr .eq. MPI_SUCCESS, 'sendrecv ierr')
      call check(st(MPI_SOURCE) .eq. prev, 'status source')
      call check(st(MPI_TAG) .eq. 5, 'status tag')
      call check(cnt .eq. 8, 'count')
      call check(b(8) .eq. 100 * prev + 8, 'sendrecv data')
!     Nonblocking, completed by waitall with statuses.
      d(1) = rank
      d(2) = 0.5d0
      d(3) = -rank
      call MPI_IRECV(e, 3, MPI_DOUBLE_PRECISION, prev, 9,
     &     MPI_COMM_WORLD, req(1), ierr)
      call MPI_ISEND(d, 3, MPI_DOUBLE_PRECISION, next, 9,
     &     MPI_COMM_WORLD, req(2), ierr)
      call MPI_WAITALL(2, req, sts, ierr)
      call check(sts(MPI_SOURCE, 1) .eq. prev, 'waitall status')
      call check(e(1) .eq. dble(prev) .and. e(2) .eq. 0.5d0,
     &     'irecv data')
      call check(req(1) .eq. MPI_REQUEST_NULL, 'request freed')
!     Waitany gives a Fortran index (from 1); MPI_UNDEFINED at the end.
      call MPI_IRECV(b, 8, MPI_INTEGER, prev, 11, MPI_COMM_WORLD,
     &     req(1), ierr)
      req(2) = MPI_REQUEST_NULL
      call MPI_SEND(a, 8, MPI_INTEGER, next, 11, MPI_COMM_WORLD, ierr)
      call MPI_WAITANY(2, req, idx, st, ierr)
      call check(idx .eq. 1, 'waitany index from 1')
!     (MPICH 4.0.2's own library gives MPI_UNDEFINED + 1 here.)
      call MPI_WAITANY(2, req, idx, MPI_STATUS_IGNORE, ierr)
      call check(idx .eq. MPI_UNDEFINED, 'waitany undefined')
!     Waitsome / testsome indices from 1 too.
      call MPI_IRECV(b, 8, MPI_INTEGER, prev, 12, MPI_COMM_WORLD,
     &     req(2), ierr)
      req(1) = MPI_REQUEST_NULL
      call MPI_SEND(a, 8, MPI_INTEGER, next, 12, MPI_COMM_WORLD, ierr)
      call MPI_WAITSOME(2, req, outc, inds, MPI_STATUSES_IGNORE, ierr)
      call check(outc .eq. 1 .and. inds(1) .eq. 2, 'waitsome index')
!     Persistent requests, started twice.
      call MPI_RECV_INIT(b, 8, MPI_INTEGER, prev, 13, MPI_COMM_WORLD,
     &     req(1), ierr)
      call MPI_SEND_INIT(a, 8, MPI_INTEGER, next, 13, MPI_COMM_WORLD,
     &     req(2), ierr)
      do n = 1, 2
         a(1) = n
         call MPI_STARTALL(2, req, ierr)
         call MPI_WAITALL(2, req, MPI_STATUSES_IGNORE, ierr)
         call check(b(1) .eq. n, 'persistent data')
      end do
      call MPI_REQUEST_FREE(req(1), ierr)
      call MPI_REQUEST_FREE(req(2), ierr)
!     Probe, then a receive of what it found; test with a LOGICAL flag.
      call MPI_SEND(a, 3, MPI_INTEGER, next, 14, MPI_COMM_WORLD, ierr)
      call MPI_PROBE(prev, 14, MPI_COMM_WORLD, st, ierr)
      call MPI_GET_COUNT(st, MPI_INTEGER, cnt, ierr)
      call check(cnt .eq. 3, 'probe count')
      call MPI_IRECV(b, cnt, MPI_INTEGER, prev, 14, MPI_COMM_WORLD,
     &     req(1), ierr)
      flag = .false.
      do while (.not. flag)
         call MPI_TEST(req(1), flag, st, ierr)
      end do
      call check(st(MPI_TAG) .eq. 14, 'test status')
      call MPI_IPROBE(prev, 99, MPI_COMM_WORLD, flag, st, ierr)
      call check(.not. flag, 'iprobe finds nothing')
!     A generalized request: the wait reports what the Fortran query
!     callback wrote, after the program completed it; the free callback
!     runs once; the extra state reaches the callbacks as an integer.
      nquery = 0
      nfree = 0
      ncancel = 0
      extra = 4242 + rank
      call MPI_GREQUEST_START(gq_query, gq_free, gq_cancel, extra,
     &     req(1), ierr)
      call check(ierr .eq. MPI_SUCCESS, 'grequest_start ierr')
      call MPI_TEST(req(1), flag, st, ierr)
      call check(.not. flag, 'grequest not complete before complete')
      call MPI_GREQUEST_COMPLETE(req(1), ierr)
      call MPI_WAIT(req(1), st, ierr)
      call check(ierr .eq. MPI_SUCCESS, 'grequest wait ierr')
      call check(req(1) .eq. MPI_REQUEST_NULL, 'grequest freed')
      call check(nquery .ge. 1 .and. nfree .eq. 1, 'grequest callbacks')
      call check(seen .eq. 4242 + rank, 'grequest extra state')
      call check(st(MPI_TAG) .eq. 77, 'grequest status tag')
      call MPI_GET_COUNT(st, MPI_INTEGER, cnt, ierr)
      call check(cnt .eq. 3, 'grequest status count')
!     Cancelled before it completes: the cancel callback hears .false.
      call MPI_GREQUEST_START(gq_query, gq_free, gq_cancel, extra,
     &     req(1), ierr)
      wasdone = .true.
      call MPI_CANCEL(req(1), ierr)
      call check(ncancel .eq. 1 .and. .not. wasdone, 'grequest cancel')
      call MPI_GREQUEST_COMPLETE(req(1), ierr)
      call MPI_WAIT(req(1), st, ierr)
      call check(nfree .eq. 2, 'cancelled grequest freed')
      call MPI_BARRIER(MPI_COMM_WORLD, ierr)
      if (rank .eq. 0) print *, 'p2p ok'
      call MPI_FINALIZE(ierr)
      end

      subroutine check(ok, what)
      implicit none
      include 'mpif.h'
      logical ok
      character*(*) what
      integer ierr
      if (.not. ok) then
         print *, 'FAILED: ', what
         call MPI_ABORT(MPI_COMM_WORLD, 1, ierr)
      end if
      end

!     The generalized request's callbacks: counts in /gq/.
      subroutine gq_query(extra, st, ierr)
      implicit none
      include 'mpif.h'
      integer(kind=MPI_ADDRESS_KIND) extra
      integer st(MPI_STATUS_SIZE), ierr
      integer nquery, nfree, ncancel
      integer(kind=MPI_ADDRESS_KIND) seen
      logical wasdone
      common /gq/ seen, nquery, nfree, ncancel, wasdone
      nquery = nquery + 1
      seen = extra
      call MPI_STATUS_SET_ELEMENTS(st, MPI_INTEGER, 3, ierr)
      call MPI_STATUS_SET_CANCELLED(st, .false., ierr)
      st(MPI_SOURCE) = MPI_UNDEFINED
      st(MPI_TAG) = 77
      ierr = MPI_SUCCESS
      end

      subroutine gq_free(extra, ierr)
      implicit none
      include 'mpif.h'
      integer(kind=MPI_ADDRESS_KIND) extra
      integer ierr
      integer nquery, nfree, ncancel
      integer(kind=MPI_ADDRESS_KIND) seen
      logical wasdone
      common /gq/ seen, nquery, nfree, ncancel, wasdone
      nfree = nfree + 1
      ierr = MPI_SUCCESS
      end

      subroutine gq_cancel(extra, complete, ierr)
      implicit none
      include 'mpif.h'
      integer(kind=MPI_ADDRESS_KIND) extra
      logical complete
      integer ierr
      integer nquery, nfree, ncancel
      integer(kind=MPI_ADDRESS_KIND) seen
      logical wasdone
      common /gq/ seen, nquery, nfree, ncancel, wasdone
      ncancel = ncancel + 1
      wasdone = complete
      ierr = MPI_SUCCESS
      end
