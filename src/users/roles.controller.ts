import { Body, Controller, Delete, Get, Param, Post, Put } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { Authenticated } from '../auth/auth.decorators.js';
import { ApiErrors } from '../common/api-errors.js';
import { SuccessResponseDto } from '../common/error-response.dto.js';
import { ApiIdParam, ParseIdPipe } from '../common/id.pipe.js';
import { CreateRoleDto, RoleDetailDto, UpdateRoleDto } from './dto/role.dto.js';
import { RolesService } from './roles.service.js';

@ApiTags('Roles')
@Controller('admin/roles')
export class RolesController {
  constructor(private readonly roles: RolesService) {}

  /**
   * Lists the roles with their rules: `admin` may do everything; `viewer` may get, list, watch and
   * read logs of every resource except Secrets (and metrics); custom roles grant what their rules say.
   */
  @Authenticated({ admin: true })
  @Get()
  @ApiOkResponse({ type: RoleDetailDto, isArray: true })
  listRoles(): Promise<RoleDetailDto[]> {
    return this.roles.listRoles();
  }

  /** Creates a custom role. */
  @Authenticated({ admin: true })
  @Post()
  @ApiCreatedResponse({ type: RoleDetailDto })
  @ApiErrors(400, 409)
  createRole(@Body() dto: CreateRoleDto): Promise<RoleDetailDto> {
    return this.roles.createRole(dto);
  }

  /** One role with its rules. */
  @Authenticated({ admin: true })
  @Get(':id')
  @ApiIdParam()
  @ApiOkResponse({ type: RoleDetailDto })
  @ApiErrors(400, 404)
  getRole(@Param('id', ParseIdPipe) id: number): Promise<RoleDetailDto> {
    return this.roles.getRole(id);
  }

  /** Changes a custom role (only the properties sent); takes effect on the next request of its holders. Built-in roles: 409. */
  @Authenticated({ admin: true })
  @Put(':id')
  @ApiIdParam()
  @ApiOkResponse({ type: RoleDetailDto })
  @ApiErrors(400, 404, 409)
  updateRole(@Param('id', ParseIdPipe) id: number, @Body() dto: UpdateRoleDto): Promise<RoleDetailDto> {
    return this.roles.updateRole(id, dto);
  }

  /** Deletes a custom role. Built-in roles, and roles a user or API key holds (named in the message): 409. */
  @Authenticated({ admin: true })
  @Delete(':id')
  @ApiIdParam()
  @ApiOkResponse({ type: SuccessResponseDto })
  @ApiErrors(400, 404, 409)
  async deleteRole(@Param('id', ParseIdPipe) id: number): Promise<SuccessResponseDto> {
    await this.roles.deleteRole(id);
    return { success: true };
  }
}
