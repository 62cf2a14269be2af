/*
 * wdmsec.h (libndk WDK kit) - IoCreateDeviceSecure and the SDDL strings.
 * There is no security model: the device is created as IoCreateDevice
 * would, and the SDDL string is not interpreted.
 */
#ifndef NDKWDK_WDMSEC_H
#define NDKWDK_WDMSEC_H

#include <wdm.h>

#ifdef __cplusplus
extern "C" {
#endif

NTSTATUS IoCreateDeviceSecure(PDRIVER_OBJECT DriverObject, ULONG DeviceExtensionSize,
                              PUNICODE_STRING DeviceName, DEVICE_TYPE DeviceType,
                              ULONG DeviceCharacteristics, BOOLEAN Exclusive,
                              PCUNICODE_STRING DefaultSDDLString, LPCGUID DeviceClassGuid,
                              PDEVICE_OBJECT *DeviceObject);

extern const UNICODE_STRING SDDL_DEVOBJ_KERNEL_ONLY;
extern const UNICODE_STRING SDDL_DEVOBJ_SYS_ALL;
extern const UNICODE_STRING SDDL_DEVOBJ_SYS_ALL_ADM_ALL;
extern const UNICODE_STRING SDDL_DEVOBJ_SYS_ALL_ADM_RX;
extern const UNICODE_STRING SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_R;
extern const UNICODE_STRING SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_RW_RES_R;
extern const UNICODE_STRING SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_RWX_RES_RWX;

#ifdef __cplusplus
}
#endif

#endif /* NDKWDK_WDMSEC_H */
