! Communicators, groups, a Cartesian topology (LOGICAL periods), names and
! error strings both ways, MPI_ERRORS_RETURN codes, a predefined attribute.
      program comm
      implicit none
      include 'mpif.h'
      integer ierr, rank, np, half, sub, subrank, dup, res, grp, g2
      integer cart, dims(2), coords(2), src, dst, cls, len, tagub
      integer ranks(1), n
      integer(kind=MPI_ADDRESS_KIND) val, extra
      integer key, ndeleted, a1, a2, blens(2), disps(2), tys(2)
      integer addrs(4)
      common /static/ addrs
      common /deletes/ ndeleted
      external count_delete
      logical periods(2), flag
      character*(MPI_MAX_OBJECT_NAME) name
      character*(MPI_MAX_ERROR_STRING) estr
      ndeleted = 0
      extra = 5
      call MPI_INIT(ierr)
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
      call MPI_COMM_SIZE(MPI_COMM_WORLD, np, ierr)
!     Split in two halves, by parity.
      half = mod(rank, 2)
      call MPI_COMM_SPLIT(MPI_COMM_WORLD, half, -rank, sub, ierr)
      call MPI_COMM_RANK(sub, subrank, ierr)
      call MPI_COMM_SIZE(sub, n, ierr)
      call check(n .eq. (np + 1 - half) / 2, 'split size')
      call check(subrank .eq. n - 1 - rank / 2, 'split key order')
      call MPI_COMM_DUP(sub, dup, ierr)
      call MPI_COMM_COMPARE(sub, dup, res, ierr)
      call check(res .eq. MPI_CONGRUENT, 'dup congruent')
      call MPI_COMM_FREE(dup, ierr)
      call check(dup .eq. MPI_COMM_NULL, 'freed')
!     Groups.
      call MPI_COMM_GROUP(MPI_COMM_WORLD, grp, ierr)
      ranks(1) = 0
      call MPI_GROUP_INCL(grp, 1, ranks, g2, ierr)
      call MPI_GROUP_SIZE(g2, n, ierr)
      call check(n .eq. 1, 'group incl')
      call MPI_GROUP_FREE(g2, ierr)
      call MPI_GROUP_FREE(grp, ierr)
!     A periodic 1-D ring as a 2-D grid of np x 1.
      dims(1) = 0
      dims(2) = 1
      call MPI_DIMS_CREATE(np, 2, dims, ierr)
      periods(1) = .true.
      periods(2) = .false.
      call MPI_CART_CREATE(MPI_COMM_WORLD, 2, dims, periods, .false.,
     &     cart, ierr)
      call MPI_CART_COORDS(cart, rank, 2, coords, ierr)
      call check(coords(1) .eq. rank, 'cart coords')
      call MPI_CART_SHIFT(cart, 0, 1, src, dst, ierr)
      call check(dst .eq. mod(rank + 1, np), 'cart shift periodic')
      call MPI_CART_GET(cart, 2, dims, periods, coords, ierr)
      call check(periods(1) .and. .not. periods(2), 'cart periods')
      call MPI_TOPO_TEST(cart, n, ierr)
      call check(n .eq. MPI_CART, 'topo test')
      call MPI_COMM_FREE(cart, ierr)
!     Names both ways: set from a blank-padded Fortran string.
      call MPI_COMM_SET_NAME(sub, 'half one  ', ierr)
      call MPI_COMM_GET_NAME(sub, name, len, ierr)
      call check(name .eq. 'half one' .and. len .eq. 8, 'comm name')
      call MPI_COMM_GET_NAME(MPI_COMM_WORLD, name, len, ierr)
      call check(name(1:len) .eq. 'MPI_COMM_WORLD', 'world name')
!     Errors returned, not fatal: a bad rank.
      call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, MPI_ERRORS_RETURN,
     &     ierr)
      call MPI_SEND(n, 1, MPI_INTEGER, np + 5, 0, MPI_COMM_WORLD, ierr)
      call check(ierr .ne. MPI_SUCCESS, 'bad rank fails')
      call MPI_ERROR_CLASS(ierr, cls, ierr)
      call check(cls .eq. MPI_ERR_RANK, 'error class')
      call MPI_ERROR_STRING(MPI_ERR_RANK, estr, len, ierr)
      call check(len .gt. 0 .and. len .le. MPI_MAX_ERROR_STRING,
     &     'error string length')
      call check(estr(len+1:) .eq. ' ', 'error string padded')
!     The predefined attribute MPI_TAG_UB, by value.
      call MPI_COMM_GET_ATTR(MPI_COMM_WORLD, MPI_TAG_UB, val, flag,
     &     ierr)
      tagub = int(val)
      call check(flag .and. tagub .ge. 32767, 'tag_ub attribute')
!     A keyval with Fortran callbacks: MPI_COMM_DUP_FN copies the value
!     to a duplicate, the program's delete callback counts the deletes.
      call MPI_COMM_CREATE_KEYVAL(MPI_COMM_DUP_FN, count_delete, key,
     &     extra, ierr)
      val = 4242
      call MPI_COMM_SET_ATTR(sub, key, val, ierr)
      call MPI_COMM_DUP(sub, dup, ierr)
      val = 0
      call MPI_COMM_GET_ATTR(dup, key, val, flag, ierr)
      call check(flag .and. val .eq. 4242, 'attribute copied by dup')
      call MPI_COMM_FREE(dup, ierr)
      call check(ndeleted .eq. 1, 'delete callback on free')
      call MPI_COMM_DELETE_ATTR(sub, key, ierr)
      call check(ndeleted .eq. 2, 'delete callback on delete')
      call MPI_COMM_FREE_KEYVAL(key, ierr)
!     MPI-1's keyvals and INTEGER attributes.
      call MPI_KEYVAL_CREATE(MPI_DUP_FN, MPI_NULL_DELETE_FN, key, 0,
     &     ierr)
      call MPI_ATTR_PUT(sub, key, 77, ierr)
      call MPI_COMM_DUP(sub, dup, ierr)
      call MPI_ATTR_GET(dup, key, n, flag, ierr)
      call check(flag .and. n .eq. 77, 'MPI-1 attribute copied')
      call MPI_ATTR_GET(dup, MPI_TAG_UB, n, flag, ierr)
      call check(flag .and. n .eq. tagub, 'MPI-1 tag_ub')
      call MPI_COMM_FREE(dup, ierr)
      call MPI_KEYVAL_FREE(key, ierr)
!     A sub-grid of a 2-D grid keeps the first dimension.
      dims(1) = 0
      dims(2) = 0
      call MPI_DIMS_CREATE(np, 2, dims, ierr)
      call MPI_CART_CREATE(MPI_COMM_WORLD, 2, dims, periods, .false.,
     &     cart, ierr)
      periods(1) = .true.
      periods(2) = .false.
      call MPI_CART_SUB(cart, periods, dup, ierr)
      call MPI_COMM_SIZE(dup, n, ierr)
      call check(n .eq. dims(1), 'cart sub size')
      call MPI_COMM_FREE(dup, ierr)
      call MPI_COMM_FREE(cart, ierr)
!     MPI-1's functions that MPI-3 removed, as old codes call them.
      call MPI_TYPE_EXTENT(MPI_DOUBLE_PRECISION, n, ierr)
      call check(n .eq. 8, 'MPI_TYPE_EXTENT')
      call MPI_ADDRESS(addrs(1), a1, ierr)
      call MPI_ADDRESS(addrs(3), a2, ierr)
      call check(a2 - a1 .eq. 8, 'MPI_ADDRESS difference')
      blens(1) = 1
      blens(2) = 1
      disps(1) = 0
      disps(2) = 8
      tys(1) = MPI_INTEGER
      tys(2) = MPI_DOUBLE_PRECISION
      call MPI_TYPE_STRUCT(2, blens, disps, tys, n, ierr)
      call MPI_TYPE_EXTENT(n, a1, ierr)
      call check(a1 .eq. 16, 'MPI_TYPE_STRUCT extent')
      call MPI_TYPE_FREE(n, ierr)
      call MPI_ERRHANDLER_GET(MPI_COMM_WORLD, n, ierr)
      call check(n .eq. MPI_ERRORS_RETURN, 'MPI_ERRHANDLER_GET')
      call MPI_ERRHANDLER_SET(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL,
     &     ierr)
      call MPI_COMM_FREE(sub, ierr)
      call MPI_BARRIER(MPI_COMM_WORLD, ierr)
      if (rank .eq. 0) print *, 'comm ok'
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

!     An attribute delete callback: counts, and checks what it is given.
      subroutine count_delete(comm, key, val, extra, ierr)
      implicit none
      include 'mpif.h'
      integer comm, key, ierr, ndeleted
      integer(kind=MPI_ADDRESS_KIND) val, extra
      common /deletes/ ndeleted
      if (val .ne. 4242 .or. extra .ne. 5) then
         print *, 'FAILED: delete callback got', val, extra
         call MPI_ABORT(MPI_COMM_WORLD, 1, ierr)
      end if
      ndeleted = ndeleted + 1
      ierr = MPI_SUCCESS
      end
