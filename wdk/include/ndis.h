/*
 * ndis.h (libndk WDK kit) - the NDIS types an NDK consumer meets, and NDKPI
 * (ndis.h brings ndkpi.h on Windows too). NDIS miniport and protocol
 * routines are not part of the kit.
 */
#ifndef NDKWDK_NDIS_H
#define NDKWDK_NDIS_H

#include <ntddk.h>
#include <ndk/ndkpi.h>

typedef NTSTATUS NDIS_STATUS, *PNDIS_STATUS;
typedef PVOID NDIS_HANDLE, *PNDIS_HANDLE;
#ifndef NDIS_STATUS_SUCCESS
#define NDIS_STATUS_SUCCESS ((NDIS_STATUS)STATUS_SUCCESS)
#endif
#ifndef NDIS_STATUS_PENDING
#define NDIS_STATUS_PENDING ((NDIS_STATUS)STATUS_PENDING)
#endif
#ifndef NDIS_STATUS_FAILURE
#define NDIS_STATUS_FAILURE ((NDIS_STATUS)STATUS_UNSUCCESSFUL)
#endif
#ifndef NDIS_STATUS_NOT_SUPPORTED
#define NDIS_STATUS_NOT_SUPPORTED ((NDIS_STATUS)STATUS_NOT_SUPPORTED)
#endif
#ifndef NDIS_STATUS_INVALID_PARAMETER
#define NDIS_STATUS_INVALID_PARAMETER ((NDIS_STATUS)STATUS_INVALID_PARAMETER)
#endif
#ifndef NDIS_STATUS_BUFFER_TOO_SHORT
#define NDIS_STATUS_BUFFER_TOO_SHORT ((NDIS_STATUS)0xC0010016L)
#endif
#ifndef NDIS_STATUS_INVALID_LENGTH
#define NDIS_STATUS_INVALID_LENGTH ((NDIS_STATUS)0xC0010014L)
#endif
#define NdisZeroMemory(Destination, Length) RtlZeroMemory(Destination, Length)
#define NdisMoveMemory(Destination, Source, Length) RtlCopyMemory(Destination, Source, Length)
#define NdisEqualMemory(Source1, Source2, Length) RtlEqualMemory(Source1, Source2, Length)

#endif /* NDKWDK_NDIS_H */
