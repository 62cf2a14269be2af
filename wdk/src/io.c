/* Device objects, symbolic links, the refused registry, and wdmsec.h.
 * There is no object namespace and no IRP traffic: a device object is a
 * place for the driver's extension and the anchor of its work items. */
#include <string.h>

#include "kit.h"
#include <wdmsec.h>

NTSTATUS IoCreateDevice(PDRIVER_OBJECT DriverObject, ULONG DeviceExtensionSize,
                        PUNICODE_STRING DeviceName, DEVICE_TYPE DeviceType,
                        ULONG DeviceCharacteristics, BOOLEAN Exclusive,
                        PDEVICE_OBJECT *DeviceObject)
{
    (void)DeviceName;
    kit_touch();
    kit_require_irql(PASSIVE_LEVEL, "IoCreateDevice", KIT_CALLER);
    if (!DriverObject || !DeviceObject)
        return STATUS_INVALID_PARAMETER;
    /* Tracked as pool with tag 'Devi' so a device never deleted is reported. */
    PDEVICE_OBJECT d = kit_pool_alloc(false, sizeof *d + DeviceExtensionSize, 0x69766544, true,
                                      KIT_CALLER);
    if (!d)
        return STATUS_INSUFFICIENT_RESOURCES;
    d->Type = 3; /* IO_TYPE_DEVICE */
    d->Size = (USHORT)sizeof *d;
    d->DriverObject = DriverObject;
    d->DeviceType = DeviceType;
    d->Characteristics = DeviceCharacteristics;
    d->Flags = DO_DEVICE_INITIALIZING | (Exclusive ? DO_EXCLUSIVE : 0);
    d->StackSize = 1;
    d->DeviceExtension = DeviceExtensionSize ? (PVOID)(d + 1) : NULL;
    d->NextDevice = DriverObject->DeviceObject;
    DriverObject->DeviceObject = d;
    *DeviceObject = d;
    return STATUS_SUCCESS;
}

VOID IoDeleteDevice(PDEVICE_OBJECT DeviceObject)
{
    kit_touch();
    PDRIVER_OBJECT drv = DeviceObject->DriverObject;
    for (PDEVICE_OBJECT *pp = &drv->DeviceObject; *pp; pp = &(*pp)->NextDevice)
        if (*pp == DeviceObject) {
            *pp = DeviceObject->NextDevice;
            break;
        }
    kit_pool_free(DeviceObject, 0, false, KIT_CALLER);
}

NTSTATUS IoCreateDeviceSecure(PDRIVER_OBJECT DriverObject, ULONG DeviceExtensionSize,
                              PUNICODE_STRING DeviceName, DEVICE_TYPE DeviceType,
                              ULONG DeviceCharacteristics, BOOLEAN Exclusive,
                              PCUNICODE_STRING DefaultSDDLString, LPCGUID DeviceClassGuid,
                              PDEVICE_OBJECT *DeviceObject)
{
    (void)DeviceClassGuid;
    if (!DefaultSDDLString)
        return STATUS_INVALID_PARAMETER;
    return IoCreateDevice(DriverObject, DeviceExtensionSize, DeviceName, DeviceType,
                          DeviceCharacteristics, Exclusive, DeviceObject);
}

NTSTATUS IoCreateSymbolicLink(PUNICODE_STRING SymbolicLinkName, PUNICODE_STRING DeviceName)
{
    kit_touch();
    return SymbolicLinkName && DeviceName ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
}

NTSTATUS IoDeleteSymbolicLink(PUNICODE_STRING SymbolicLinkName)
{
    return SymbolicLinkName ? STATUS_SUCCESS : STATUS_INVALID_PARAMETER;
}

/* No registry: a driver's defaults apply. */
NTSTATUS ZwOpenKey(PHANDLE KeyHandle, ACCESS_MASK DesiredAccess,
                   POBJECT_ATTRIBUTES ObjectAttributes)
{
    (void)DesiredAccess, (void)ObjectAttributes;
    kit_touch();
    if (KeyHandle)
        *KeyHandle = NULL;
    return STATUS_NOT_SUPPORTED;
}

NTSTATUS ZwQueryValueKey(HANDLE KeyHandle, PUNICODE_STRING ValueName,
                         KEY_VALUE_INFORMATION_CLASS KeyValueInformationClass,
                         PVOID KeyValueInformation, ULONG Length, PULONG ResultLength)
{
    (void)KeyHandle, (void)ValueName, (void)KeyValueInformationClass, (void)KeyValueInformation,
        (void)Length;
    if (ResultLength)
        *ResultLength = 0;
    return STATUS_NOT_SUPPORTED;
}

#define SDDL(name, text)                                                                   \
    static WCHAR name##_text[] = L"" text;                                                 \
    const UNICODE_STRING name = {sizeof(name##_text) - sizeof(WCHAR), sizeof(name##_text),  \
                                 name##_text}
SDDL(SDDL_DEVOBJ_KERNEL_ONLY, "D:P");
SDDL(SDDL_DEVOBJ_SYS_ALL, "D:P(A;;GA;;;SY)");
SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_ALL, "D:P(A;;GA;;;SY)(A;;GA;;;BA)");
SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_RX, "D:P(A;;GA;;;SY)(A;;GRGX;;;BA)");
SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_R, "D:P(A;;GA;;;SY)(A;;GRGWGX;;;BA)(A;;GR;;;WD)");
SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_RW_RES_R,
     "D:P(A;;GA;;;SY)(A;;GRGWGX;;;BA)(A;;GRGW;;;WD)(A;;GR;;;RC)");
SDDL(SDDL_DEVOBJ_SYS_ALL_ADM_RWX_WORLD_RWX_RES_RWX,
     "D:P(A;;GA;;;SY)(A;;GRGWGX;;;BA)(A;;GRGWGX;;;WD)(A;;GRGWGX;;;RC)");
